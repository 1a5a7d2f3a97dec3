//! The SigV4 signing key: HMAC chained from the secret over the scope's
//! date, region, service and terminator. It is all a verifier needs of
//! the secret, and it is valid for one day and one region.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{SERVICE, TERMINATOR};

pub(crate) type HmacSha256 = Hmac<Sha256>;

/// A MAC keyed with `key`.
pub(crate) fn mac(key: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length (a long one is hashed first); this
    // constructor has no failing path for it.
    <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC-SHA256 takes keys of any length")
}

pub(crate) fn finish(m: HmacSha256) -> [u8; 32] {
    m.finalize().into_bytes().into()
}

/// Feeds the scope, `date/region/s3/aws4_request`, to a MAC (the
/// string to sign and every aws-chunked chunk's name it).
pub(crate) fn update_scope(m: &mut impl Mac, date: &str, region: &str) {
    m.update(date.as_bytes());
    m.update(b"/");
    m.update(region.as_bytes());
    m.update(b"/");
    m.update(SERVICE.as_bytes());
    m.update(b"/");
    m.update(TERMINATOR.as_bytes());
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut m = mac(key);
    m.update(data);
    finish(m)
}

/// The key that signs requests of one scope (day and region), derived
/// from a secret access key. Holds the keyed MAC state ready to clone, so
/// each signature costs only the hashing of its string to sign.
#[derive(Clone)]
pub struct SigningKey {
    mac: HmacSha256,
    date: String,
    region: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key signs like the secret for a day: never print it.
        f.debug_struct("SigningKey")
            .field("date", &self.date)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region),
    /// "s3"), "aws4_request").
    pub fn derive(secret_access_key: &str, date_yyyymmdd: &str, region: &str) -> SigningKey {
        let mut k_secret = Vec::with_capacity(4 + secret_access_key.len());
        k_secret.extend_from_slice(b"AWS4");
        k_secret.extend_from_slice(secret_access_key.as_bytes());
        let k_date = hmac(&k_secret, date_yyyymmdd.as_bytes());
        let k_region = hmac(&k_date, region.as_bytes());
        let k_service = hmac(&k_region, SERVICE.as_bytes());
        let k_signing = hmac(&k_service, TERMINATOR.as_bytes());
        SigningKey {
            mac: mac(&k_signing),
            date: date_yyyymmdd.to_owned(),
            region: region.to_owned(),
        }
    }

    /// The `yyyymmdd` of the scope it signs for.
    pub fn date(&self) -> &str {
        &self.date
    }

    /// The region of the scope it signs for.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// `date/region/s3/aws4_request`
    pub fn scope(&self) -> String {
        format!("{}/{}/{SERVICE}/{TERMINATOR}", self.date, self.region)
    }

    /// The keyed MAC, ready to hash a string to sign.
    pub(crate) fn mac(&self) -> HmacSha256 {
        self.mac.clone()
    }

    /// The signature of `string_to_sign`.
    pub fn sign(&self, string_to_sign: &[u8]) -> [u8; 32] {
        let mut m = self.mac();
        m.update(string_to_sign);
        finish(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sigv4::hex_lower;

    /// RFC 4231 test cases 1 and 2: the MAC underneath is HMAC-SHA256.
    #[test]
    fn rfc4231_vectors() {
        assert_eq!(
            hex_lower(&hmac(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex_lower(&hmac(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    /// The key knows its scope and never prints its bytes. (Its value is
    /// checked end to end by the AWS examples in tests_aws.)
    #[test]
    fn scope_is_kept() {
        let k = SigningKey::derive("secret", "20130524", "eu-west-1");
        assert_eq!(k.scope(), "20130524/eu-west-1/s3/aws4_request");
        assert_eq!(
            format!("{k:?}"),
            r#"SigningKey { date: "20130524", region: "eu-west-1", .. }"#
        );
    }
}
