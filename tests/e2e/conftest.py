"""The end-to-end tests reuse the audit tests' moto S3 server."""

from tests.audit.conftest import s3_env  # noqa: F401
