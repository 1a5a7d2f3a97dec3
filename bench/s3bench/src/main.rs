//! s3bench: an S3 load generator for bench/s3.sh, the same client against
//! every server.
//!
//! - `put-small`: small-object PUTs (4 KiB by default) of distinct keys on
//!   N keep-alive connections for T seconds, each request signed with
//!   SigV4 as the SDKs sign it; requests/s, latency, errors, and the
//!   server's own CPU time per request (`--server-pid`).
//! - `multipart`: one large object (1 GiB by default) uploaded in parts
//!   on a few connections and downloaded as ranged GETs; MB/s each way.
//!
//! Every answer is checked (status, ETag; the download byte for byte) and
//! a run with errors says so. It prints one JSON object on stdout (what
//! bench/s3.sh records) and a summary on stderr.
//!
//! What a request looks like, by default: what boto3, aws-cli and
//! aws-sdk-s3 send for a PUT of a body they hold in memory over plain
//! HTTP: the payload signed (`x-amz-content-sha256` is the body's SHA-256)
//! and `x-amz-checksum-crc32` (`--checksum`, `--payload` change them). One
//! difference: no `Expect: 100-continue` (boto3 sends it and waits for the
//! interim answer; a 4 KiB body does not need it, and it would add a round
//! trip on both servers alike).

use std::net::{SocketAddr, ToSocketAddrs};

use clap::{Parser, Subcommand};
// A server's CPU time from /proc and the descriptor limit, as netbench
// has them.
use pktfs_netbench::child;
use pktfs_s3::sigv4::Signer;
use serde_json::json;

mod bodies;
mod http;
mod latency;
mod multipart;
mod request;
mod small_put;

use bodies::{Body, Checksum};
use request::{Endpoint, Payload};

#[derive(Parser, Debug)]
#[command(
    name = "s3bench",
    about = "S3 small-PUT load and multipart transfers, checked"
)]
struct Cli {
    /// The endpoint, `http://HOST:PORT` (path-style requests).
    #[arg(long)]
    endpoint: String,
    /// The region the requests are signed for.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    #[arg(long)]
    access_key_id: String,
    #[arg(long)]
    secret_access_key: String,
    /// The bucket (made first with `--create-bucket`).
    #[arg(long)]
    bucket: String,
    /// Send CreateBucket first (an answer that it exists is fine).
    #[arg(long)]
    create_bucket: bool,
    /// The server's process: its CPU time (with its children's) over each
    /// measured phase is reported.
    #[arg(long)]
    server_pid: Option<u32>,
    /// The checksum header each PUT carries.
    #[arg(long, value_enum, default_value = "crc32")]
    checksum: Checksum,
    /// How payloads are signed.
    #[arg(long, value_enum, default_value = "signed")]
    payload: Payload,
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Small-object PUTs of distinct keys on many connections.
    PutSmall {
        #[arg(long, default_value_t = 16)]
        conns: usize,
        #[arg(long, default_value_t = 10.0)]
        secs: f64,
        #[arg(long, default_value_t = 4096)]
        size_bytes: usize,
        /// Client event loops (each an epoll thread).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Keys are `PREFIX/...`.
        #[arg(long, default_value = "small")]
        prefix: String,
    },
    /// One object uploaded in parts, then downloaded as ranged GETs.
    Multipart {
        #[arg(long, default_value_t = 1024)]
        size_mib: u64,
        #[arg(long, default_value_t = 16)]
        part_mib: usize,
        /// Connections, each with one part in flight.
        #[arg(long, default_value_t = 4)]
        parallel: usize,
        #[arg(long, default_value = "large/object.bin")]
        key: String,
    },
}

/// This process's CPU seconds so far (user and system).
fn own_cpu_s() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| {
            let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
            s(u.user_time()) + s(u.system_time())
        })
        .unwrap_or(f64::NAN)
}

fn server_cpu_s(pid: Option<u32>) -> Option<f64> {
    pid.map(child::tree_cpu_s)
}

/// `host:port` of an `http://` endpoint, and its address.
fn host_of(endpoint: &str) -> Result<(String, SocketAddr), String> {
    let rest = endpoint.strip_prefix("http://").ok_or_else(|| {
        format!("the endpoint {endpoint} is not http://HOST:PORT (https is not spoken here)")
    })?;
    let host = rest.trim_end_matches('/').to_string();
    if host.contains('/') {
        return Err(format!(
            "the endpoint {endpoint} has a path; path-style requests add the bucket"
        ));
    }
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("{host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    Ok((host, addr))
}

fn create_bucket(ep: &Endpoint, bucket: &str, payload: Payload) -> Result<(), String> {
    let mut c = http::Conn::connect(&ep.host).map_err(|e| format!("connect {}: {e}", ep.host))?;
    let head = ep.head("PUT", &format!("/{bucket}"), "", None, payload, &[]);
    let a = c.request(&head, &[], 1 << 20)?;
    let text = String::from_utf8_lossy(&a.body);
    if a.head.status == 200 || text.contains("BucketAlreadyOwnedByYou") {
        Ok(())
    } else {
        Err(format!("CreateBucket {bucket}: {}: {text}", a.head.status))
    }
}

fn run(cli: Cli) -> Result<serde_json::Value, String> {
    let (host, addr) = host_of(&cli.endpoint)?;
    let ep = Endpoint {
        host,
        signer: Signer {
            access_key_id: cli.access_key_id.clone(),
            secret_access_key: cli.secret_access_key.clone(),
            region: cli.region.clone(),
        },
    };
    if cli.create_bucket {
        create_bucket(&ep, &cli.bucket, cli.payload)?;
    }
    let common = json!({
        "endpoint": cli.endpoint,
        "checksum": cli.checksum.name(),
        "payload": cli.payload.name(),
    });
    match cli.what {
        What::PutSmall {
            conns,
            secs,
            size_bytes,
            threads,
            prefix,
        } => {
            child::raise_nofile();
            // 64 bodies in turn: distinct keys, bodies that differ, and
            // every digest made before the clock starts.
            let bodies: Vec<Body> = (0..64)
                .map(|k| Body::new(bodies::pattern(size_bytes, k), cli.checksum))
                .collect();
            let o = small_put::Opts {
                conns,
                threads,
                secs,
                checksum: cli.checksum,
                payload: cli.payload,
                bucket: cli.bucket.clone(),
                prefix,
            };
            let (s0, c0) = (server_cpu_s(cli.server_pid), own_cpu_s());
            let r = small_put::run(&ep, addr, &o, &bodies)?;
            let (s1, c1) = (server_cpu_s(cli.server_pid), own_cpu_s());
            let answered = (r.ok + r.errors).max(1) as f64;
            let server_cpu = s0.zip(s1).map(|(a, b)| b - a);
            let req_s = r.ok as f64 / r.elapsed_s.max(1e-9);
            eprintln!(
                "put-small: {conns} conns, {size_bytes} B: {req_s:.0} req/s, {} ok, {} errors, \
                 p50 {} us, p99 {} us, server CPU {} us/request",
                r.ok,
                r.errors,
                r.latency
                    .quantile_us(0.5)
                    .map_or("-".into(), |v| v.to_string()),
                r.latency
                    .quantile_us(0.99)
                    .map_or("-".into(), |v| v.to_string()),
                server_cpu.map_or("?".into(), |s| format!("{:.1}", s / answered * 1e6)),
            );
            if let Some(e) = &r.first_error {
                eprintln!("put-small: first error: {e}");
            }
            Ok(json!({
                "op": "put-small",
                "common": common,
                "conns": conns,
                "client_threads": threads,
                "secs": secs,
                "size_bytes": size_bytes,
                "ok": r.ok,
                "errors": r.errors,
                "first_error": r.first_error,
                "elapsed_s": r.elapsed_s,
                "req_s": req_s,
                "latency_samples": r.latency.count(),
                "p50_us": r.latency.quantile_us(0.5),
                "p99_us": r.latency.quantile_us(0.99),
                "server_cpu_s": server_cpu,
                "server_cpu_us_per_req": server_cpu.map(|s| s / answered * 1e6),
                "client_cpu_s": c1 - c0,
            }))
        }
        What::Multipart {
            size_mib,
            part_mib,
            parallel,
            key,
        } => {
            let o = multipart::Opts {
                size_bytes: size_mib << 20,
                part_bytes: part_mib << 20,
                parallel,
                distinct: 4,
                checksum: cli.checksum,
                payload: cli.payload,
                bucket: cli.bucket.clone(),
                key,
            };
            // (phase, the server's CPU seconds, the client's) at each mark.
            let mut marks: Vec<(String, Option<f64>, f64)> = Vec::new();
            let pid = cli.server_pid;
            let r = multipart::run(&ep, &o, &mut |p| {
                marks.push((p.into(), server_cpu_s(pid), own_cpu_s()))
            })?;
            let cpu = |a: &str, b: &str| {
                let at = |n: &str| marks.iter().find(|m| m.0 == n).and_then(|m| m.1);
                at(a).zip(at(b)).map(|(x, y)| y - x)
            };
            let client_cpu = |a: &str, b: &str| {
                let at = |n: &str| marks.iter().find(|m| m.0 == n).map(|m| m.2);
                at(a).zip(at(b)).map(|(x, y)| y - x)
            };
            let bytes = o.size_bytes as f64;
            let (up, down) = (bytes / r.upload_s / 1e6, bytes / r.download_s / 1e6);
            eprintln!(
                "multipart: {size_mib} MiB in {} parts of {part_mib} MiB, {parallel} at a time: \
                 upload {up:.0} MB/s ({:.2} s), download {down:.0} MB/s ({:.2} s)",
                r.parts, r.upload_s, r.download_s
            );
            Ok(json!({
                "op": "multipart",
                "common": common,
                "size_bytes": o.size_bytes,
                "part_bytes": o.part_bytes,
                "parts": r.parts,
                "parallel": parallel,
                "upload_s": r.upload_s,
                "download_s": r.download_s,
                "upload_mb_s": up,
                "download_mb_s": down,
                "upload_server_cpu_s": cpu("upload-start", "upload-end"),
                "download_server_cpu_s": cpu("download-start", "download-end"),
                "upload_client_cpu_s": client_cpu("upload-start", "upload-end"),
                "download_client_cpu_s": client_cpu("download-start", "download-end"),
            }))
        }
    }
}

fn main() {
    let cli = Cli::parse();
    match run(cli) {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("s3bench: {e}");
            std::process::exit(1);
        }
    }
}
