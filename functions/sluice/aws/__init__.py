"""Adapters to AWS services: each a small class over one botocore client, errors translated to ours."""
