"""The SQS work queue (and its dead-letter queue): created once a function needs or consumes it."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.nag import acknowledge

MAX_RECEIVES = 5
# AWS's guidance: a queue's visibility timeout at least six times its consumer's timeout.
VISIBILITY_FACTOR = 6


class WorkQueue(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, consumer_timeout_s: int) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        acknowledge(
            self.dead_letters,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of the work queue; jobs that land here are alarmed on "
            "and inspected by hand, so it has no dead-letter queue of its own.",
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=cdk.Duration.seconds(VISIBILITY_FACTOR * consumer_timeout_s),
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=MAX_RECEIVES, queue=self.dead_letters),
        )
