//! A file's records as a pcapng capture (`pktfs chain --pcap`): the
//! blocks of the pcapng format (draft-ietf-opsawg-pcapng) written by hand,
//! every field encoded little-endian explicitly, because the three blocks
//! needed are short and the crates that write pcapng got the timestamp
//! resolution of Enhanced Packet Blocks wrong until recently.
//!
//! The file is one Section Header Block, one Interface Description Block
//! (`if_tsresol` 9: timestamps in nanoseconds, the records' own unit), and
//! one Enhanced Packet Block per record.
//!
//! # What a packet is
//! The link type is `LINKTYPE_RAW` (an IPv4 packet with no link header).
//! Each packet is a synthesized IPv4 and TCP header followed by the
//! record's payload bytes, so Wireshark and tshark dissect it as TCP and
//! "Follow TCP Stream" reassembles the file: the TCP sequence number is the
//! byte's **file offset** (modulo 2^32), not the record's `seq` (for a
//! received record that is its position in the connection's stream, which
//! counts request headers and chunk framing that are not in the file; it
//! is in the comment). A hole in the file is a gap in the sequence numbers.
//! The headers are synthetic and say so in the comment: pktfs does not
//! keep the peer's addresses, so every packet goes from [`SRC`] to [`DST`]
//! (TEST-NET-1, RFC 5737, addresses that are never a real host), port
//! [`SRC_PORT`] to [`DST_PORT`]. The IPv4 and TCP checksums are correct.
//!
//! The packet's timestamp is the record's `timestamp_ns`: the kernel's
//! receive time when the record has `FLAG_KERNEL_TIME`, otherwise the
//! receiver's clock (a received record) or the write time; the comment's
//! `kernel_time=` and `from_network=` say which. Each packet's comment
//! (`opt_comment`) also carries the record's number, CRC32C (hex), `seq`,
//! file offset and length.
//!
//! # Records longer than one packet
//! IPv4's total length is 16 bits, so a packet carries at most
//! [`MAX_PAYLOAD`] bytes of payload. A longer record (a large write's
//! record spans whole buffers) is written as several packets, each with
//! the record's time and a comment naming the part (`part=K/N`, and the
//! byte range of the record it holds); every other record is exactly one
//! packet.

use std::io::{self, Write};
use std::net::Ipv4Addr;

/// The synthetic sender of every packet (RFC 5737 TEST-NET-1).
pub const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The synthetic receiver: pktfs.
pub const DST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// Dynamic ports (RFC 6335) that no Wireshark dissector claims, so the
/// payload shows as TCP data.
pub const SRC_PORT: u16 = 49152;
pub const DST_PORT: u16 = 49153;

const IPV4_HEADER_BYTES: usize = 20;
const TCP_HEADER_BYTES: usize = 20;
/// Most payload bytes one packet carries: IPv4's 16-bit total length less
/// the two headers.
pub const MAX_PAYLOAD: usize = u16::MAX as usize - IPV4_HEADER_BYTES - TCP_HEADER_BYTES;

const BLOCK_SHB: u32 = 0x0A0D_0D0A;
const BLOCK_IDB: u32 = 1;
const BLOCK_EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// LINKTYPE_RAW: the packet begins with its IPv4 (or IPv6) header.
const LINKTYPE_RAW: u16 = 101;
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_DESCRIPTION: u16 = 3;
const IF_TSRESOL: u16 = 9;
/// `if_tsresol` 9: timestamps count 10^-9 s.
const TSRESOL_NS: u8 = 9;

/// What a packet says about its record (payload aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordFacts {
    pub record: u64,
    pub file_offset: u64,
    pub seq: u64,
    pub timestamp_ns: u64,
    pub crc32c: u32,
    pub kernel_time: bool,
    pub from_network: bool,
}

/// Writes a capture: the section and interface headers when made, then
/// packets record by record.
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: W,
    packets: u64,
}

impl<W: Write> Writer<W> {
    /// Start a capture of the file `name` (the interface's name and
    /// description say what the packets are).
    pub fn new(mut out: W, name: &str) -> io::Result<Writer<W>> {
        let mut shb = Vec::new();
        put_u32(&mut shb, BYTE_ORDER_MAGIC);
        put_u16(&mut shb, 1); // major version
        put_u16(&mut shb, 0); // minor version
        shb.extend_from_slice(&(-1i64).to_le_bytes()); // section length: not given
        put_opt(
            &mut shb,
            SHB_USERAPPL,
            format!("pktfs {}", env!("CARGO_PKG_VERSION")).as_bytes(),
        );
        put_u32(&mut shb, u32::from(OPT_END)); // code 0, length 0
        write_block(&mut out, BLOCK_SHB, &shb)?;

        let mut idb = Vec::new();
        put_u16(&mut idb, LINKTYPE_RAW);
        put_u16(&mut idb, 0); // reserved
        put_u32(&mut idb, u32::from(u16::MAX)); // snaplen: a whole packet
        put_opt(&mut idb, IF_NAME, format!("pktfs:{name}").as_bytes());
        put_opt(
            &mut idb,
            IF_DESCRIPTION,
            b"pktfs records of one file: one packet per record (longer ones in parts); \
              synthetic IPv4/TCP headers, TCP sequence = file offset",
        );
        put_opt(&mut idb, IF_TSRESOL, &[TSRESOL_NS]);
        put_u32(&mut idb, u32::from(OPT_END));
        write_block(&mut out, BLOCK_IDB, &idb)?;
        Ok(Writer { out, packets: 0 })
    }

    /// Write one record as its packet (or packets, past [`MAX_PAYLOAD`]).
    /// Returns how many packets.
    pub fn record(&mut self, r: &RecordFacts, payload: &[u8]) -> io::Result<u32> {
        let parts = payload.len().div_ceil(MAX_PAYLOAD).max(1);
        for k in 0..parts {
            let from = k * MAX_PAYLOAD;
            let part = &payload[from..payload.len().min(from + MAX_PAYLOAD)];
            let mut comment = format!(
                "pktfs record={} crc32c={:08x} seq={} file_offset={} length={} \
                 kernel_time={} from_network={}",
                r.record,
                r.crc32c,
                r.seq,
                r.file_offset,
                payload.len(),
                r.kernel_time,
                r.from_network
            );
            if parts > 1 {
                comment.push_str(&format!(
                    " part={}/{parts} part_bytes=[{from},{})",
                    k + 1,
                    from + part.len()
                ));
            }
            comment.push_str(" (synthetic IPv4/TCP headers)");
            let tcp_seq = r.file_offset.wrapping_add(from as u64) as u32;
            self.packet(r.timestamp_ns, tcp_seq, part, &comment)?;
        }
        Ok(parts as u32)
    }

    fn packet(
        &mut self,
        ts_ns: u64,
        tcp_seq: u32,
        payload: &[u8],
        comment: &str,
    ) -> io::Result<()> {
        let data = ipv4_tcp(self.packets as u16, tcp_seq, payload);
        let mut epb = Vec::with_capacity(data.len() + comment.len() + 40);
        put_u32(&mut epb, 0); // interface 0
        put_u32(&mut epb, (ts_ns >> 32) as u32);
        put_u32(&mut epb, ts_ns as u32);
        put_u32(&mut epb, data.len() as u32); // captured
        put_u32(&mut epb, data.len() as u32); // original
        epb.extend_from_slice(&data);
        pad4(&mut epb);
        put_opt(&mut epb, OPT_COMMENT, comment.as_bytes());
        put_u32(&mut epb, u32::from(OPT_END));
        write_block(&mut self.out, BLOCK_EPB, &epb)?;
        self.packets += 1;
        Ok(())
    }

    /// Packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flush and hand back the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// An IPv4 header, a TCP header (PSH|ACK, the given sequence number) and
/// the payload (at most [`MAX_PAYLOAD`] bytes), with both checksums.
fn ipv4_tcp(ip_id: u16, tcp_seq: u32, payload: &[u8]) -> Vec<u8> {
    debug_assert!(payload.len() <= MAX_PAYLOAD);
    let total = IPV4_HEADER_BYTES + TCP_HEADER_BYTES + payload.len();
    let mut p = Vec::with_capacity(total);
    // IPv4 (fields big-endian, as on the wire).
    p.push(0x45); // version 4, header of 5 words
    p.push(0); // DSCP/ECN
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&ip_id.to_be_bytes());
    p.extend_from_slice(&0x4000u16.to_be_bytes()); // don't fragment
    p.push(64); // TTL
    p.push(6); // TCP
    p.extend_from_slice(&[0, 0]); // checksum, below
    p.extend_from_slice(&SRC.octets());
    p.extend_from_slice(&DST.octets());
    let ip_sum = checksum(&[&p[..IPV4_HEADER_BYTES]]);
    p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    // TCP.
    let t = p.len();
    p.extend_from_slice(&SRC_PORT.to_be_bytes());
    p.extend_from_slice(&DST_PORT.to_be_bytes());
    p.extend_from_slice(&tcp_seq.to_be_bytes());
    p.extend_from_slice(&0u32.to_be_bytes()); // ack
    p.push(0x50); // header of 5 words
    p.push(0x18); // PSH | ACK
    p.extend_from_slice(&u16::MAX.to_be_bytes()); // window
    p.extend_from_slice(&[0, 0]); // checksum, below
    p.extend_from_slice(&[0, 0]); // urgent pointer
    p.extend_from_slice(payload);
    let tcp_len = (TCP_HEADER_BYTES + payload.len()) as u16;
    let mut pseudo = Vec::with_capacity(12);
    pseudo.extend_from_slice(&SRC.octets());
    pseudo.extend_from_slice(&DST.octets());
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&tcp_len.to_be_bytes());
    let tcp_sum = checksum(&[&pseudo, &p[t..]]);
    p[t + 16..t + 18].copy_from_slice(&tcp_sum.to_be_bytes());
    p
}

/// The Internet checksum (RFC 1071) of the parts, as if concatenated (every
/// part but the last has an even length).
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum = 0u64;
    for part in parts {
        let mut words = part.chunks_exact(2);
        for w in &mut words {
            sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [last] = words.remainder() {
            sum += u64::from(*last) << 8;
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn put_u16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn pad4(b: &mut Vec<u8>) {
    while !b.len().is_multiple_of(4) {
        b.push(0);
    }
}

/// One option: code, length, value padded to 32 bits. Values longer than
/// an option can say are cut (only the comment could be, and it is short).
fn put_opt(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    let value = &value[..value.len().min(u16::MAX as usize)];
    put_u16(b, code);
    put_u16(b, value.len() as u16);
    b.extend_from_slice(value);
    pad4(b);
}

/// A block: type, total length, body (a multiple of 4 bytes), total length.
fn write_block(out: &mut impl Write, kind: u32, body: &[u8]) -> io::Result<()> {
    debug_assert_eq!(body.len() % 4, 0);
    let total = u32::try_from(body.len() + 12)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a pcapng block over 4 GiB"))?;
    out.write_all(&kind.to_le_bytes())?;
    out.write_all(&total.to_le_bytes())?;
    out.write_all(body)?;
    out.write_all(&total.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    /// The blocks of a capture: (type, body).
    fn blocks(b: &[u8]) -> Vec<(u32, &[u8])> {
        let mut v = Vec::new();
        let mut at = 0;
        while at < b.len() {
            let len = u32_at(b, at + 4) as usize;
            assert_eq!(len % 4, 0);
            assert_eq!(u32_at(b, at + len - 4) as usize, len, "trailing length");
            v.push((u32_at(b, at), &b[at + 8..at + len - 4]));
            at += len;
        }
        v
    }

    fn facts() -> RecordFacts {
        RecordFacts {
            record: 7,
            file_offset: 4096,
            seq: 4300,
            timestamp_ns: 1_700_000_000_123_456_789,
            crc32c: 0xdead_beef,
            kernel_time: true,
            from_network: true,
        }
    }

    #[test]
    fn one_record_is_one_packet_with_its_time_and_comment() {
        let mut w = Writer::new(Vec::new(), "/a").unwrap();
        assert_eq!(w.record(&facts(), b"hello").unwrap(), 1);
        let out = w.finish().unwrap();
        let b = blocks(&out);
        assert_eq!(
            b.iter().map(|x| x.0).collect::<Vec<_>>(),
            [BLOCK_SHB, BLOCK_IDB, BLOCK_EPB]
        );
        // if_tsresol 9 in the interface block.
        let idb = b[1].1;
        assert_eq!(u16::from_le_bytes([idb[0], idb[1]]), LINKTYPE_RAW);
        assert!(idb.windows(5).any(|w| w == [9, 0, 1, 0, 9]), "if_tsresol");
        let epb = b[2].1;
        let ts = (u64::from(u32_at(epb, 4)) << 32) | u64::from(u32_at(epb, 8));
        assert_eq!(ts, facts().timestamp_ns);
        let cap = u32_at(epb, 12) as usize;
        assert_eq!(cap, 40 + 5);
        let pkt = &epb[20..20 + cap];
        assert_eq!(&pkt[40..], b"hello");
        assert_eq!(checksum(&[&pkt[..20]]), 0, "IPv4 header checksum");
        assert_eq!(u32::from_be_bytes(pkt[24..28].try_into().unwrap()), 4096);
        let text = String::from_utf8_lossy(&epb[20 + cap..]);
        assert!(
            text.contains(
                "record=7 crc32c=deadbeef seq=4300 file_offset=4096 length=5 kernel_time=true"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_record_longer_than_a_packet_is_split_in_order() {
        let payload: Vec<u8> = (0..MAX_PAYLOAD * 2 + 10).map(|i| i as u8).collect();
        let mut w = Writer::new(Vec::new(), "/big").unwrap();
        assert_eq!(w.record(&facts(), &payload).unwrap(), 3);
        let out = w.finish().unwrap();
        let mut got = Vec::new();
        for (k, (_, epb)) in blocks(&out).into_iter().skip(2).enumerate() {
            let cap = u32_at(epb, 12) as usize;
            let pkt = &epb[20..20 + cap];
            let seq = u32::from_be_bytes(pkt[24..28].try_into().unwrap());
            assert_eq!(seq as usize, 4096 + k * MAX_PAYLOAD);
            assert_eq!(u16::from_be_bytes([pkt[2], pkt[3]]) as usize, cap);
            got.extend_from_slice(&pkt[40..]);
            let text = String::from_utf8_lossy(&epb[20 + cap..]);
            assert!(text.contains(&format!("part={}/3", k + 1)), "{text}");
        }
        assert_eq!(got, payload);
    }

    #[test]
    fn internet_checksum_matches_rfc1071_example() {
        // RFC 1071 section 3's words sum to ddf2; the checksum is its complement.
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&[&b]), !0xddf2);
    }
}
