"""The one DynamoDB table (built from agent_core.store.schema) and the data bucket."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from agent_core.store import schema
from infra.components import removal_policy
from infra.nag import acknowledge
from infra.settings import InfraSettings

TMP_PREFIX = "tmp/"
TMP_EXPIRY_DAYS = 1


def _string_key(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


class Storage(Construct):
    """Table: on-demand, pk/sk and every index of `schema.INDEXES`, TTL on `schema.TTL_ATTRIBUTE`, PITR.

    Outside the dev stage the table has deletion protection and both resources are retained on delete.
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: InfraSettings) -> None:
        super().__init__(scope, construct_id)
        removal = removal_policy(settings)

        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_string_key(schema.PK),
            sort_key=_string_key(schema.SK),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=schema.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=not settings.is_dev,
            removal_policy=removal,
        )
        for index in schema.INDEXES:
            self.table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_string_key(index.pk),
                sort_key=_string_key(index.sk),
                projection_type=dynamodb.ProjectionType.ALL,
            )
        self.index_names = tuple(index.name for index in schema.INDEXES)

        self.bucket = s3.Bucket(
            self,
            "DataBucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-tmp",
                    prefix=TMP_PREFIX,
                    expiration=cdk.Duration.days(TMP_EXPIRY_DAYS),
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(1),
                ),
            ],
            removal_policy=removal,
            auto_delete_objects=settings.is_dev,
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "The data bucket holds only the app's own objects, read and written by the stack's functions; "
            "their access is in CloudTrail and the functions' logs, so S3 server access logs add no audit value.",
        )
