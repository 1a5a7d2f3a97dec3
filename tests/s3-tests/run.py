#!/usr/bin/env python3
"""Run the vendored S3 conformance suite (Ceph's s3-tests, upstream/) against
a fresh pktfs S3 endpoint or a fresh single-node Garage, on the selection
left-out.txt leaves: the same tests for both.

    tests/s3-tests/run.py pktfs --pktfs target/debug/pktfs --mkfs target/debug/mkfs-pktfs
    tests/s3-tests/run.py pktfs --pktfs target/debug/pktfs --image FRESH.img
    tests/s3-tests/run.py garage --garage ~/.cargo/bin/garage

Three keys (main, alt, tenant) that may create buckets and reach only their
own; the suite's IAM, STS and cloud sections are left out (left-out.txt), so
their settings are placeholders. Prints a summary and writes it as JSON
(--json); exits 1 when a selected test failed or errored.
"""

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
UPSTREAM = os.path.join(HERE, "upstream")
REGION = "us-east-1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, secs=60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < secs:
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode} before it listened")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not listen on 127.0.0.1:{port} within {secs} s")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r.stdout


class Pktfs:
    """`pktfs serve IMAGE --s3` on a fresh image, with three keys made by
    `pktfs keys add --create-buckets`."""

    def __init__(self, args, work):
        if args.image:
            # A fresh image the caller formatted (the Rust test does, with
            # the library mkfs.pktfs uses).
            self.image = args.image
        else:
            self.image = os.path.join(work, "s3-tests.img")
            run([args.mkfs, "--size", "4G", self.image])
        self.keys = {}
        for name in ("main", "alt", "tenant"):
            out = run([args.pktfs, "keys", "add", self.image, name, "--create-buckets", "--json"])
            k = json.loads(out)
            self.keys[name] = (k["access_key_id"], k["secret_access_key"])
        self.port = free_port()
        self.log = open(os.path.join(work, "pktfs.log"), "w")
        self.proc = subprocess.Popen(
            [args.pktfs, "serve", self.image, "--s3", f"127.0.0.1:{self.port}", "--s3-region", REGION],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc, "pktfs serve")
        self.version = run([args.pktfs, "--version"]).strip()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


class Garage:
    """A single-node Garage with replication 1 and SQLite metadata, in
    REGION, with three keys allowed to create buckets."""

    def __init__(self, args, work):
        self.g = args.garage
        self.port = free_port()
        rpc, admin = free_port(), free_port()
        self.conf = os.path.join(work, "garage.toml")
        with open(self.conf, "w") as f:
            f.write(f"""metadata_dir = "{work}/meta"
data_dir = "{work}/data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:{rpc}"
rpc_public_addr = "127.0.0.1:{rpc}"
rpc_secret = "{secrets.token_hex(32)}"
[s3_api]
s3_region = "{REGION}"
api_bind_addr = "127.0.0.1:{self.port}"
root_domain = ".s3.garage.localhost"
[admin]
api_bind_addr = "127.0.0.1:{admin}"
""")
        self.log = open(os.path.join(work, "garage.log"), "w")
        self.proc = subprocess.Popen([self.g, "-c", self.conf, "server"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(rpc, self.proc, "garage server")
        node = self.cli("node", "id", "-q").strip().split("@")[0]
        self.cli("layout", "assign", "-z", "dc1", "-c", "8G", node)
        self.cli("layout", "apply", "--version", "1")
        wait_port(self.port, self.proc, "garage's S3 API")
        self.keys = {}
        for name in ("main", "alt", "tenant"):
            out = self.cli("key", "create", name)
            kid = re.search(r"(GK[0-9a-f]+)", out).group(1)
            secret = re.search(r"Secret key:\s*([0-9a-f]+)", out, re.I).group(1)
            self.cli("key", "allow", "--create-bucket", kid)
            self.keys[name] = (kid, secret)
        self.version = run([self.g, "--version"]).strip()

    def cli(self, *a):
        return run([self.g, "-c", self.conf, *a])

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def write_conf(path, port, keys):
    def user(name):
        kid, secret = keys[name]
        return f"""display_name = {name}
user_id = {kid}
email = {name}@example.com
access_key = {kid}
secret_key = {secret}
"""
    placeholder = "access_key = none\nsecret_key = none\nuser_id = none\nemail = none\n"
    with open(path, "w") as f:
        f.write(f"""[DEFAULT]
host = 127.0.0.1
port = {port}
is_secure = False
ssl_verify = False

[fixtures]
bucket prefix = s3t-{{random}}-

[s3 main]
{user("main")}api_name =

[s3 alt]
{user("alt")}
[s3 tenant]
{user("tenant")}tenant = tenant

[iam]
{placeholder}display_name = none

[iam root]
{placeholder}
[iam alt root]
{placeholder}""")


def summarize(junit, target, version):
    root = ET.parse(junit).getroot()
    cases = root.iter("testcase")
    passed, failed, skipped = [], [], []
    for c in cases:
        name = c.get("name")
        if c.find("failure") is not None or c.find("error") is not None:
            failed.append(name)
        elif c.find("skipped") is not None:
            skipped.append(name)
        else:
            passed.append(name)
    with open(os.path.join(HERE, "UPSTREAM")) as f:
        upstream = f.read().split()[1]
    return {
        "suite": "ceph/s3-tests",
        "suite_commit": upstream,
        "target": target,
        "target_version": version,
        "selected": len(passed) + len(failed) + len(skipped),
        "passed": len(passed),
        "failed": len(failed),
        "skipped": len(skipped),
        "failures": sorted(failed),
        "skips": sorted(skipped),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=["pktfs", "garage"])
    p.add_argument("--pktfs", default="target/debug/pktfs")
    p.add_argument("--mkfs", default="target/debug/mkfs-pktfs")
    p.add_argument("--image", help="a freshly formatted image to serve instead of making one with --mkfs")
    p.add_argument("--garage", default=shutil.which("garage") or "garage")
    p.add_argument("--json", help="write the summary here")
    p.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --), e.g. -k NAME")
    args = p.parse_args()
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    work = tempfile.mkdtemp(prefix="pktfs-s3-tests-", dir=base)
    server = None
    try:
        server = Pktfs(args, work) if args.target == "pktfs" else Garage(args, work)
        conf = os.path.join(work, "s3tests.conf")
        write_conf(conf, server.port, server.keys)
        junit = os.path.join(work, "junit.xml")
        env = dict(os.environ, S3TEST_CONF=conf, AWS_DEFAULT_REGION=REGION, PYTHONPATH=HERE,
                   PYTHONDONTWRITEBYTECODE="1")
        if args.target == "garage":
            # Garage has no ListObjectVersions, which the suite's cleanup
            # uses (selection.py, list_current).
            env["S3_TESTS_CLEANUP_BY_LISTING"] = "1"
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
            env.pop(k, None)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "selection",
               "-rfE", "--junitxml", junit,
               "s3tests/functional/test_s3.py", "s3tests/functional/test_headers.py", *args.pytest_args]
        subprocess.run(cmd, cwd=UPSTREAM, env=env)
        if not os.path.exists(junit):
            sys.exit("pytest wrote no results (above)")
        s = summarize(junit, args.target, server.version)
        print(f"\n{args.target} ({server.version}): {s['passed']} passed, {s['failed']} failed, "
              f"{s['skipped']} skipped of {s['selected']} selected (ceph/s3-tests {s['suite_commit'][:12]})")
        for f in s["failures"]:
            print(f"  failed: {f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(s, f, indent=1)
        sys.exit(1 if s["failed"] else 0)
    finally:
        if server:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
