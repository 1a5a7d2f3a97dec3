"""A pytest plugin: leave out what tests/s3-tests/left-out.txt names, each
with its reason, and nothing else.

Each line of left-out.txt is `SELECTOR<TAB>REASON`: SELECTOR is a test's
name (`test_bucket_list_delimiter_basic`), a glob over names
(`test_*_acl_*`) or `marker:NAME` (a pytest marker the upstream suite puts
on the tests of one feature, e.g. `marker:versioning`). A selector that
selects nothing is an error: the list must not outlive the suite it was
written for.
"""

import fnmatch
import os

import pytest

LIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "left-out.txt")


def read_list():
    entries = []
    with open(LIST, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            sel, tab, reason = line.partition("\t")
            if not tab or not reason.strip():
                raise pytest.UsageError(f"{LIST}:{n}: SELECTOR<TAB>REASON expected, got {line!r}")
            entries.append((sel.strip(), reason.strip(), n))
    return entries


def matches(sel, item):
    if sel.startswith("marker:"):
        return item.get_closest_marker(sel[len("marker:"):]) is not None
    return fnmatch.fnmatchcase(item.name, sel)


def pytest_collection_modifyitems(config, items):
    entries = read_list()
    used = set()
    kept, left = [], []
    for item in items:
        why = None
        for sel, reason, n in entries:
            if matches(sel, item):
                used.add(n)
                why = why or reason
        (left if why else kept).append(item)
    unused = [f"{LIST}:{n}: {sel}" for sel, _, n in entries if n not in used]
    if unused:
        raise pytest.UsageError("selectors that select no test:\n  " + "\n  ".join(unused))
    items[:] = kept
    config.hook.pytest_deselected(items=left)


def list_current(client, bucket, batch_size):
    """The suite's cleanup lists object versions to delete them; a server
    without ListObjectVersions (Garage) gets its objects listed by
    ListObjectsV2 instead, so that cleanup, which no test is about, does not
    fail every test there."""
    kwargs = {"Bucket": bucket, "MaxKeys": batch_size}
    while True:
        listing = client.list_objects_v2(**kwargs)
        objs = listing.get("Contents", [])
        if objs:
            yield [{"Key": o["Key"]} for o in objs]
        if not listing.get("IsTruncated"):
            return
        kwargs["ContinuationToken"] = listing["NextContinuationToken"]


def pytest_configure(config):
    if os.environ.get("S3_TESTS_CLEANUP_BY_LISTING") == "1":
        import s3tests.functional as f

        f.list_versions = list_current
