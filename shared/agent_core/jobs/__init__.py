"""Background jobs: the work queues (`inprocess`, `sqs`), the SQS batch consumer (`worker`), the job bodies
(`compaction`, `session_summaries`, `profile`, `daily`) and what runs them (`handlers`: the `{job type: handler}`
map and the scheduled passes). The composition root wires them; nothing here imports it."""
