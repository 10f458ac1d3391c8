"""The ports on AWS: DynamoDB for the ledger and frontier, S3 for objects, SQS for the queue (botocore only)."""
