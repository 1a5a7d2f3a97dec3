#!/usr/bin/env python3
"""boto3 against an S3 endpoint, as pktfs/tests/s3_clients.rs runs it.

    boto3_client.py mb                   create bucket $S3_BUCKET
    boto3_client.py all                  every check below, on bucket $S3_BUCKET
    boto3_client.py partial-multipart    start an upload of $S3_KEY, put 2 parts in, print
                                         `upload-id ID` and a presigned URL for part 3
                                         (`part3-url URL`), and leave it unfinished
    boto3_client.py after-kill           nothing of that upload is visible

The endpoint and keys come from the environment: S3_ENDPOINT, S3_REGION, S3_KEY_ID,
S3_SECRET, S3_BUCKET (made by `mb` or the caller), and optionally S3_RO_KEY_ID/S3_RO_SECRET
(a key allowed to read $S3_BUCKET and not to write it) and S3_FLAVOR=garage (Garage's error codes).

Every check runs even when an earlier one failed; each failure is printed as
`FAILED <check>: <why>` and the exit status is 1 if there was any.
"""

import base64
import hashlib
import os
import sys
import time
import traceback
import urllib.error
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["S3_ENDPOINT"]
REGION = os.environ["S3_REGION"]
KEY_ID = os.environ["S3_KEY_ID"]
SECRET = os.environ["S3_SECRET"]
BUCKET = os.environ["S3_BUCKET"]
MIB = 1024 * 1024
# Garage refuses a wrong secret and an unknown key as AccessDenied and an
# expired presigned URL as 400 InvalidRequest; S3 (and pktfs) answer
# SignatureDoesNotMatch, InvalidAccessKeyId and 403 AccessDenied.
GARAGE = os.environ.get("S3_FLAVOR") == "garage"

failures = []


def client(key_id=KEY_ID, secret=SECRET):
    return boto3.session.Session().client(
        "s3",
        endpoint_url=ENDPOINT,
        region_name=REGION,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            # One try: a refused request must be seen as it was answered.
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=10,
            read_timeout=60,
        ),
    )


def check(name):
    """Run the decorated function now as one named check."""

    def run(f):
        try:
            f()
            print(f"ok {name}", flush=True)
        except Exception as e:  # a failed check is reported, the others still run
            failures.append(name)
            print(f"FAILED {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(limit=3, file=sys.stdout)
        return f

    return run


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def error_code(f):
    """The S3 error code `f()` was refused with (it must be refused)."""
    try:
        f()
    except ClientError as e:
        return e.response.get("Error", {}).get("Code")
    raise AssertionError("the request was not refused")


def crc32c(data):
    """CRC32C (Castagnoli, reflected, as S3's x-amz-checksum-crc32c)."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC32C_TABLE = _table()
# The published check value: CRC-32C of "123456789" is 0xE3069283.
assert crc32c(b"123456789") == 0xE3069283


def b64_crc(v):
    return base64.b64encode(v.to_bytes(4, "big")).decode()


def pattern(n, seed):
    """n bytes that differ with the seed and along the data (not one repeated byte)."""
    block = hashlib.sha256(f"pktfs-{seed}".encode()).digest() * 2048  # 64 KiB
    return (block * (n // len(block) + 1))[:n]


def absent(c, key):
    """HeadObject says 404."""
    code = error_code(lambda: c.head_object(Bucket=BUCKET, Key=key))
    expect(code in ("404", "NoSuchKey"), f"{key}: HEAD answered {code}, not 404")


def http(method, url, data=None):
    """(status, body) of a plain HTTP request (presigned URLs)."""
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def run_all():
    c = client()
    small = pattern(100_000, 1)

    @check("list_buckets and head_bucket")
    def _():
        names = [b["Name"] for b in c.list_buckets()["Buckets"]]
        expect(BUCKET in names, f"{BUCKET} not in {names}")
        c.head_bucket(Bucket=BUCKET)
        code = error_code(lambda: c.head_bucket(Bucket="pktfs-no-such-bucket"))
        expect(code in ("404", "NoSuchBucket"), f"HEAD of a missing bucket: {code}")

    @check("put_object with CRC32C, get_object with checksum mode")
    def _():
        want = b64_crc(crc32c(small))
        r = c.put_object(Bucket=BUCKET, Key="b/small.bin", Body=small, ChecksumAlgorithm="CRC32C")
        expect(r.get("ChecksumCRC32C") == want, f"PUT answered {r.get('ChecksumCRC32C')}, want {want}")
        etag = r["ETag"]
        expect(etag == f'"{hashlib.md5(small).hexdigest()}"', f"ETag {etag} is not the MD5")
        g = c.get_object(Bucket=BUCKET, Key="b/small.bin", ChecksumMode="ENABLED")
        body = g["Body"].read()
        expect(body == small, "GET returned other bytes")
        expect(g.get("ChecksumCRC32C") == want, f"GET's checksum {g.get('ChecksumCRC32C')}, want {want}")
        expect(g["ETag"] == etag, f"GET's ETag {g['ETag']} != PUT's {etag}")
        h = c.head_object(Bucket=BUCKET, Key="b/small.bin", ChecksumMode="ENABLED")
        expect(h["ContentLength"] == len(small), f"HEAD length {h['ContentLength']}")
        expect(h.get("ChecksumCRC32C") == want, f"HEAD's checksum {h.get('ChecksumCRC32C')}")

    @check("a wrong CRC32C is refused and stores nothing")
    def _():
        bad = b64_crc(crc32c(small) ^ 1)
        code = error_code(
            lambda: c.put_object(Bucket=BUCKET, Key="b/badcrc.bin", Body=small, ChecksumCRC32C=bad)
        )
        expect(code in ("InvalidDigest", "BadDigest", "InvalidRequest"), f"refused with {code}")
        absent(c, "b/badcrc.bin")

    @check("ranged and conditional GET")
    def _():
        g = c.get_object(Bucket=BUCKET, Key="b/small.bin", Range="bytes=1000-1999")
        expect(g["ResponseMetadata"]["HTTPStatusCode"] == 206, "Range not answered 206")
        expect(g["Body"].read() == small[1000:2000], "Range returned other bytes")
        g = c.get_object(Bucket=BUCKET, Key="b/small.bin", Range="bytes=-10")
        expect(g["Body"].read() == small[-10:], "suffix Range returned other bytes")
        etag = c.head_object(Bucket=BUCKET, Key="b/small.bin")["ETag"]
        code = error_code(lambda: c.get_object(Bucket=BUCKET, Key="b/small.bin", IfNoneMatch=etag))
        expect(code in ("304", "NotModified"), f"If-None-Match of the ETag: {code}")
        code = error_code(lambda: c.get_object(Bucket=BUCKET, Key="b/small.bin", IfMatch='"0123"'))
        expect(code in ("412", "PreconditionFailed"), f"If-Match of another ETag: {code}")
        g = c.get_object(Bucket=BUCKET, Key="b/small.bin", IfMatch=etag)
        expect(g["Body"].read() == small, "If-Match of the ETag returned other bytes")

    @check("list_objects_v2 pages of 5 over 23 keys, with and without a delimiter")
    def _():
        files = [f"page/k{i:02}" for i in range(18)]
        nested = ["page/d0/a", "page/d0/b", "page/d1/a", "page/d2/a", "page/d3/a"]
        for k in files + nested:
            c.put_object(Bucket=BUCKET, Key=k, Body=k.encode())

        def pages(**kw):
            keys, prefixes, n, token = [], [], 0, None
            while True:
                args = dict(Bucket=BUCKET, Prefix="page/", MaxKeys=5, **kw)
                if token:
                    args["ContinuationToken"] = token
                r = c.list_objects_v2(**args)
                n += 1
                got = [o["Key"] for o in r.get("Contents", [])]
                got_p = [p["Prefix"] for p in r.get("CommonPrefixes", [])]
                expect(len(got) + len(got_p) <= 5, f"a page of {len(got) + len(got_p)} over MaxKeys=5")
                expect(r["KeyCount"] == len(got) + len(got_p), f"KeyCount {r['KeyCount']}")
                keys += got
                prefixes += got_p
                if not r["IsTruncated"]:
                    return keys, prefixes, n
                token = r["NextContinuationToken"]
                expect(n < 50, "more than 50 pages")

        keys, prefixes, n = pages()
        expect(keys == sorted(files + nested), f"keys without a delimiter: {keys}")
        expect(n == 5, f"{n} pages of 5 for 23 keys")
        keys, prefixes, n = pages(Delimiter="/")
        expect(keys == files, f"keys with a delimiter: {keys}")
        expect(prefixes == ["page/d0/", "page/d1/", "page/d2/", "page/d3/"], f"prefixes {prefixes}")
        expect(n == 5, f"{n} pages of 5 for 18 keys and 4 prefixes")
        # StartAfter, and the paginator as applications use it.
        r = c.list_objects_v2(Bucket=BUCKET, Prefix="page/", StartAfter="page/k15")
        expect([o["Key"] for o in r["Contents"]] == ["page/k16", "page/k17"], "StartAfter")
        seen = []
        for p in c.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix="page/d", PaginationConfig={"PageSize": 2}
        ):
            seen += [o["Key"] for o in p.get("Contents", [])]
        expect(seen == nested, f"paginator: {seen}")

    @check("copy_object")
    def _():
        r = c.copy_object(Bucket=BUCKET, Key="b/copy.bin", CopySource={"Bucket": BUCKET, "Key": "b/small.bin"})
        expect(r["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(small).hexdigest()}"', "the copy's ETag")
        expect(c.get_object(Bucket=BUCKET, Key="b/copy.bin")["Body"].read() == small, "the copy's bytes")

    @check("delete_objects and delete_object")
    def _():
        r = c.delete_objects(
            Bucket=BUCKET,
            Delete={"Objects": [{"Key": "page/k00"}, {"Key": "page/k01"}, {"Key": "page/never-there"}]},
        )
        deleted = sorted(d["Key"] for d in r.get("Deleted", []))
        expect(deleted == ["page/k00", "page/k01", "page/never-there"], f"Deleted: {deleted}")
        expect(not r.get("Errors"), f"Errors: {r.get('Errors')}")
        absent(c, "page/k00")
        absent(c, "page/k01")
        c.delete_object(Bucket=BUCKET, Key="b/copy.bin")
        absent(c, "b/copy.bin")
        expect(c.head_object(Bucket=BUCKET, Key="page/k02")["ContentLength"] == 8, "a key not deleted")

    @check("multipart: 3 parts, list_parts, list_multipart_uploads, complete")
    def _():
        key = "big/multi.bin"
        parts = [pattern(5 * MIB, 10), pattern(5 * MIB, 11), pattern(5 * MIB + 123, 12)]
        up = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        etags = []
        for i, p in enumerate(parts, start=1):
            r = c.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=i, Body=p)
            expect(r["ETag"] == f'"{hashlib.md5(p).hexdigest()}"', f"part {i}'s ETag {r['ETag']}")
            etags.append(r)
        lp = c.list_parts(Bucket=BUCKET, Key=key, UploadId=up)
        got = [(p["PartNumber"], p["Size"], p["ETag"]) for p in lp["Parts"]]
        want = [(i, len(p), e["ETag"]) for i, (p, e) in enumerate(zip(parts, etags), start=1)]
        expect(got == want, f"list_parts: {got}")
        ups = c.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
        expect((key, up) in [(u["Key"], u["UploadId"]) for u in ups], f"list_multipart_uploads: {ups}")
        absent(c, key)  # nothing visible before Complete
        # The parts by ETag alone, as S3 takes them when the upload was
        # created without a checksum algorithm.
        done = [{"PartNumber": i, "ETag": e["ETag"]} for i, e in enumerate(etags, start=1)]
        r = c.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId=up, MultipartUpload={"Parts": done}
        )
        md5s = b"".join(hashlib.md5(p).digest() for p in parts)
        want_etag = f'"{hashlib.md5(md5s).hexdigest()}-3"'
        expect(r["ETag"] == want_etag, f"Complete's ETag {r['ETag']}, want {want_etag}")
        whole = b"".join(parts)
        g = c.get_object(Bucket=BUCKET, Key=key)
        expect(g["ContentLength"] == len(whole), f"length {g['ContentLength']}")
        expect(hashlib.sha256(g["Body"].read()).digest() == hashlib.sha256(whole).digest(), "bytes differ")
        g = c.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={5 * MIB - 10}-{5 * MIB + 9}")
        expect(g["Body"].read() == whole[5 * MIB - 10 : 5 * MIB + 10], "a range across two parts")
        ups = c.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
        expect(up not in [u["UploadId"] for u in ups], "the completed upload is still listed")

    @check("multipart with CRC32C: part checksums, the composite checksum")
    def _():
        key = "big/multi-crc32c.bin"
        parts = [pattern(5 * MIB, 13), pattern(1000, 14)]
        up = c.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm="CRC32C")["UploadId"]
        done = []
        for i, p in enumerate(parts, start=1):
            r = c.upload_part(
                Bucket=BUCKET, Key=key, UploadId=up, PartNumber=i, Body=p, ChecksumAlgorithm="CRC32C"
            )
            done.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumCRC32C": r["ChecksumCRC32C"]})
        expect(done[1]["ChecksumCRC32C"] == b64_crc(crc32c(parts[1])), "part 2's CRC32C")
        r = c.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId=up, MultipartUpload={"Parts": done}
        )
        # S3's composite checksum: the CRC32C of the parts' CRC32Cs, "-N".
        raw = b"".join(base64.b64decode(d["ChecksumCRC32C"]) for d in done)
        want = f"{b64_crc(crc32c(raw))}-2"
        expect(r.get("ChecksumCRC32C") == want, f"Complete's CRC32C {r.get('ChecksumCRC32C')}, want {want}")
        g = c.get_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
        expect(g["Body"].read() == b"".join(parts), "bytes differ")
        expect(g.get("ChecksumCRC32C") == want, f"GET's CRC32C {g.get('ChecksumCRC32C')}, want {want}")

    @check("multipart: abort")
    def _():
        key = "big/aborted.bin"
        up = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        c.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=1, Body=pattern(MIB, 20))
        c.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up)
        ups = c.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
        expect(up not in [u["UploadId"] for u in ups], "the aborted upload is still listed")
        code = error_code(lambda: c.list_parts(Bucket=BUCKET, Key=key, UploadId=up))
        expect(code == "NoSuchUpload", f"list_parts of an aborted upload: {code}")
        absent(c, key)

    @check("presigned GET and PUT")
    def _():
        body = pattern(30_000, 30)
        url = c.generate_presigned_url(
            "put_object", Params={"Bucket": BUCKET, "Key": "pre/put.bin"}, ExpiresIn=300
        )
        st, text = http("PUT", url, body)
        expect(st == 200, f"presigned PUT: {st} {text[:300]!r}")
        url = c.generate_presigned_url(
            "get_object", Params={"Bucket": BUCKET, "Key": "pre/put.bin"}, ExpiresIn=300
        )
        st, got = http("GET", url)
        expect(st == 200 and got == body, f"presigned GET: {st}, {len(got)} bytes")
        # The URL is for GET only.
        st, _ = http("DELETE", url)
        expect(st == 403, f"a presigned GET URL used for DELETE: {st}")
        expect(c.head_object(Bucket=BUCKET, Key="pre/put.bin")["ContentLength"] == len(body), "deleted")

    @check("a wrong secret: SignatureDoesNotMatch, nothing stored")
    def _():
        bad = client(secret=SECRET[:-1] + ("A" if SECRET[-1] != "A" else "B"))
        code = error_code(lambda: bad.put_object(Bucket=BUCKET, Key="auth/wrong-secret", Body=b"x"))
        expect(code == ("AccessDenied" if GARAGE else "SignatureDoesNotMatch"), f"refused with {code}")
        absent(c, "auth/wrong-secret")

    @check("an unknown key: InvalidAccessKeyId, nothing stored")
    def _():
        bad = client(key_id=KEY_ID[:4] + "NOSUCHKEY000000", secret=SECRET)
        code = error_code(lambda: bad.put_object(Bucket=BUCKET, Key="auth/unknown-key", Body=b"x"))
        expect(code == ("AccessDenied" if GARAGE else "InvalidAccessKeyId"), f"refused with {code}")
        absent(c, "auth/unknown-key")

    @check("an expired presigned URL: AccessDenied, nothing stored")
    def _():
        url = c.generate_presigned_url(
            "put_object", Params={"Bucket": BUCKET, "Key": "auth/expired"}, ExpiresIn=1
        )
        time.sleep(2.2)
        st, text = http("PUT", url, b"late")
        want = (400, b"<Code>InvalidRequest</Code>") if GARAGE else (403, b"<Code>AccessDenied</Code>")
        expect(st == want[0] and want[1] in text, f"expired PUT: {st} {text[:300]!r}")
        absent(c, "auth/expired")

    if os.environ.get("S3_RO_KEY_ID"):

        @check("a read-only key reads and is refused writes")
        def _():
            ro = client(os.environ["S3_RO_KEY_ID"], os.environ["S3_RO_SECRET"])
            expect(ro.get_object(Bucket=BUCKET, Key="b/small.bin")["Body"].read() == small, "read")
            code = error_code(lambda: ro.put_object(Bucket=BUCKET, Key="auth/ro", Body=b"x"))
            expect(code == "AccessDenied", f"a write refused with {code}")
            absent(c, "auth/ro")

    @check("create_bucket, delete_bucket (refused while not empty)")
    def _():
        name = BUCKET + "-two"
        c.create_bucket(Bucket=name)
        c.put_object(Bucket=name, Key="x", Body=b"x")
        code = error_code(lambda: c.delete_bucket(Bucket=name))
        expect(code == "BucketNotEmpty", f"deleting a bucket with an object: {code}")
        c.delete_object(Bucket=name, Key="x")
        c.delete_bucket(Bucket=name)
        names = [b["Name"] for b in c.list_buckets()["Buckets"]]
        expect(name not in names, "the deleted bucket is still listed")


def partial_multipart():
    c = client()
    key = os.environ["S3_KEY"]
    up = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    for i in (1, 2):
        c.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=i, Body=pattern(5 * MIB, 40 + i))
    url = c.generate_presigned_url(
        "upload_part",
        Params={"Bucket": BUCKET, "Key": key, "UploadId": up, "PartNumber": 3},
        ExpiresIn=600,
    )
    print(f"upload-id {up}")
    print(f"part3-url {url}", flush=True)


def after_kill():
    c = client()
    key = os.environ["S3_KEY"]

    @check("after the kill: no object, no upload, an empty listing")
    def _():
        absent(c, key)
        ups = c.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
        expect(not ups, f"uploads listed after the restart: {ups}")
        r = c.list_objects_v2(Bucket=BUCKET)
        expect(r["KeyCount"] == 0, f"objects listed: {[o['Key'] for o in r.get('Contents', [])]}")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what == "mb":
        client().create_bucket(Bucket=BUCKET)
    elif what == "all":
        run_all()
    elif what == "partial-multipart":
        partial_multipart()
    elif what == "after-kill":
        after_kill()
    else:
        print(f"unknown command {what!r} (mb, all, partial-multipart, after-kill)", file=sys.stderr)
        return 2
    if failures:
        print(f"boto3: {len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
