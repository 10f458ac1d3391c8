"""Adapters to AWS services: each a small class over one boto3 client, errors translated to ours."""
