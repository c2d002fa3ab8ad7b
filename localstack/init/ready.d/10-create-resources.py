#!/usr/bin/env python3
"""Create leasehold's tasks table and queues from localstack/resources.json.

Idempotent: existing resources are kept; queue attributes and the table's
TTL are brought in line with the definition. A table whose indexes differ
from the definition (made by an older checkout) is deleted and created anew:
the local stack's tasks are disposable. Endpoints come from AWS_ENDPOINT_URL_DYNAMODB and
AWS_ENDPOINT_URL_SQS, which must both be set, so this never touches a real
account by accident. LEASEHOLD_RESOURCE_SUFFIX, if set, is appended to every
name (for example "-dev"). LEASEHOLD_RESOURCES_ENV, if set, names a file that
receives shell export lines for what was created (LEASEHOLD_TABLE and one
LEASEHOLD_<NAME>_QUEUE_URL or LEASEHOLD_<NAME>_DLQ_URL per queue, and
LEASEHOLD_PAYLOAD_BUCKET for the bucket of large values), which
`scripts/stack.sh env` prints. The bucket is made only when the definition
has one and AWS_ENDPOINT_URL_S3 is set.

It runs as LocalStack's ready hook inside the container and, in host mode,
with the python of the venv that scripts/stack.sh installs. LocalStack runs
ready.d Python hooks with exec() and empty globals, inside its own process:
there is no __file__, __name__ is "builtins", and the script must raise
rather than exit. LEASEHOLD_RESOURCES names the definition file there.
"""

import json
import os
import pathlib
import sys

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError


class SetupError(Exception):
    """A problem with the definition or the environment, not with AWS."""


def fail(msg):
    raise SetupError(msg)


def definition_path():
    explicit = os.environ.get("LEASEHOLD_RESOURCES")
    if explicit:
        return pathlib.Path(explicit)
    here = globals().get("__file__")
    if not here:
        fail("LEASEHOLD_RESOURCES is not set and this script's location is unknown")
    # localstack/init/ready.d/ -> localstack/resources.json
    return pathlib.Path(here).resolve().parent.parent.parent / "resources.json"


def load_definition():
    path = definition_path()
    try:
        with path.open() as f:
            return json.load(f)
    except OSError as err:
        fail(f"read {path}: {err}")


def client(service, endpoint_var):
    endpoint = os.environ.get(endpoint_var)
    if not endpoint:
        fail(f"{endpoint_var} is not set; refusing to guess an endpoint")
    # boto3 reads AWS_DEFAULT_REGION but not AWS_REGION, which the Go SDK uses.
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        config=Config(
            connect_timeout=5,
            read_timeout=30,
            # standard mode also retries refused connections while an
            # emulator is still starting.
            retries={"mode": "standard", "max_attempts": 8},
        ),
    )


def error_code(err):
    return err.response.get("Error", {}).get("Code", "")


def index_shapes(indexes):
    """The name, keys and projection of each GSI, comparable across a
    CreateTable request and a DescribeTable answer."""
    shapes = set()
    for ix in indexes:
        keys = tuple((k["AttributeName"], k["KeyType"]) for k in ix["KeySchema"])
        proj = ix.get("Projection", {})
        shapes.add((ix["IndexName"], keys, proj.get("ProjectionType", "ALL"),
                    tuple(sorted(proj.get("NonKeyAttributes", [])))))
    return shapes


def ensure_table(ddb, spec, suffix):
    create = dict(spec["CreateTable"])
    name = create["TableName"] + suffix
    create["TableName"] = name
    try:
        table = ddb.describe_table(TableName=name)["Table"]
        if index_shapes(table.get("GlobalSecondaryIndexes", [])) != index_shapes(create.get("GlobalSecondaryIndexes", [])):
            # A table made from an older resources.json (for example
            # before the listing index became by_created). The local
            # stack's tasks are disposable; the code needs the indexes
            # it was written for.
            print(f"table {name}: its indexes differ from resources.json; deleting it and creating it anew (its tasks are lost)")
            ddb.delete_table(TableName=name)
            ddb.get_waiter("table_not_exists").wait(
                TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
            )
            ddb.create_table(**create)
            print(f"table {name}: created")
        else:
            print(f"table {name}: exists")
    except ClientError as err:
        if error_code(err) != "ResourceNotFoundException":
            raise
        ddb.create_table(**create)
        print(f"table {name}: created")
    ddb.get_waiter("table_exists").wait(
        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
    )
    EXPORTS["LEASEHOLD_TABLE"] = name

    ttl = spec.get("TimeToLiveSpecification")
    if ttl:
        current = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        enabled = current.get("TimeToLiveStatus") in ("ENABLED", "ENABLING")
        if enabled and current.get("AttributeName") == ttl["AttributeName"]:
            print(f"table {name}: TTL on {ttl['AttributeName']} already enabled")
        else:
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
            print(f"table {name}: TTL on {ttl['AttributeName']} enabled")


def ensure_queues(sqs, specs, suffix):
    arns = {}  # name in resources.json -> ARN of the created queue
    for spec in specs:
        base = spec["CreateQueue"]["QueueName"]
        name = base + suffix
        attrs = dict(spec["CreateQueue"].get("Attributes", {}))
        redrive = spec.get("RedrivePolicy")
        if redrive:
            target = redrive["deadLetterTargetQueueName"]
            if target not in arns:
                fail(f"queue {base} redrives to {target}, which must be defined before it")
            attrs["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": arns[target], "maxReceiveCount": redrive["maxReceiveCount"]}
            )
        try:
            url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
            sqs.set_queue_attributes(QueueUrl=url, Attributes=attrs)
            print(f"queue {name}: exists, attributes updated")
        except ClientError as err:
            if error_code(err) not in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
                raise
            url = sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
            print(f"queue {name}: created")
        arns[base] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        EXPORTS[queue_var(base)] = url


# Shell variables describing what was created, for LEASEHOLD_RESOURCES_ENV.
EXPORTS = {}


def queue_var(base):
    """leasehold-work -> LEASEHOLD_WORK_QUEUE_URL, leasehold-work-dlq -> LEASEHOLD_WORK_DLQ_URL."""
    stem = base.removeprefix("leasehold-")
    if stem.endswith("-dlq"):
        return "LEASEHOLD_" + stem.removesuffix("-dlq").upper().replace("-", "_") + "_DLQ_URL"
    return "LEASEHOLD_" + stem.upper().replace("-", "_") + "_QUEUE_URL"


def write_exports(path):
    import shlex

    with open(path, "w") as f:
        for key in sorted(EXPORTS):
            f.write(f"export {key}={shlex.quote(EXPORTS[key])}\n")


def ensure_bucket(s3, spec, suffix):
    """The bucket where values over the inline limits go (claim checks),
    encrypted by default as the template's is."""
    name = spec["Bucket"] + suffix
    try:
        s3.head_bucket(Bucket=name)
        print(f"bucket {name}: exists")
    except ClientError as err:
        if error_code(err) not in ("404", "NoSuchBucket", "NotFound"):
            raise
        s3.create_bucket(Bucket=name)
        print(f"bucket {name}: created")
    s3.put_bucket_encryption(
        Bucket=name,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    EXPORTS["LEASEHOLD_PAYLOAD_BUCKET"] = name


def main():
    definition = load_definition()
    suffix = os.environ.get("LEASEHOLD_RESOURCE_SUFFIX", "")
    ddb = client("dynamodb", "AWS_ENDPOINT_URL_DYNAMODB")
    sqs = client("sqs", "AWS_ENDPOINT_URL_SQS")
    ensure_table(ddb, definition["Table"], suffix)
    ensure_queues(sqs, definition["Queues"], suffix)
    if "Bucket" in definition and os.environ.get("AWS_ENDPOINT_URL_S3"):
        ensure_bucket(client("s3", "AWS_ENDPOINT_URL_S3"), definition["Bucket"], suffix)
    out = os.environ.get("LEASEHOLD_RESOURCES_ENV")
    if out:
        write_exports(out)


if __name__ == "__main__":
    try:
        main()
    except SetupError as err:
        print(f"create-resources: {err}", file=sys.stderr)
        sys.exit(1)
elif __name__ == "builtins":
    # exec()ed by LocalStack's init hook: it logs an exception as a failed hook.
    main()
