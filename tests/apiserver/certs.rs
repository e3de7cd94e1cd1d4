//! Test PKI made at test time with rcgen (no key material is committed): a CA, a server
//! certificate for the given names, a client certificate signed by the CA, and an
//! unrelated CA for "wrong CA" tests.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// PEM texts of one test PKI.
#[derive(Clone)]
pub struct Certs {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    /// A CA the server does not trust, and a client certificate it signed.
    pub other_ca_pem: String,
    pub stranger_cert_pem: String,
    pub stranger_key_pem: String,
}

fn ca(cn: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, cn);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    (p.self_signed(&key).unwrap(), key)
}

impl Certs {
    /// `server_names`: DNS names and IP literals for the server certificate's SANs.
    pub fn new(server_names: &[&str]) -> Certs {
        let (ca_cert, ca_key) = ca("tether test CA");
        let (other, other_key) = ca("unrelated CA");

        let srv_key = KeyPair::generate().unwrap();
        let names: Vec<String> = server_names.iter().map(|s| s.to_string()).collect();
        let mut sp = CertificateParams::new(names).unwrap();
        sp.distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let srv = sp.signed_by(&srv_key, &ca_cert, &ca_key).unwrap();

        let cli_key = KeyPair::generate().unwrap();
        let mut cp = CertificateParams::new(Vec::<String>::new()).unwrap();
        cp.distinguished_name
            .push(DnType::CommonName, "system:node:vm1");
        cp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cli = cp.signed_by(&cli_key, &ca_cert, &ca_key).unwrap();

        let str_key = KeyPair::generate().unwrap();
        let mut stp = CertificateParams::new(Vec::<String>::new()).unwrap();
        stp.distinguished_name.push(DnType::CommonName, "stranger");
        stp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let stranger = stp.signed_by(&str_key, &other, &other_key).unwrap();

        Certs {
            ca_pem: ca_cert.pem(),
            server_cert_pem: srv.pem(),
            server_key_pem: srv_key.serialize_pem(),
            client_cert_pem: cli.pem(),
            client_key_pem: cli_key.serialize_pem(),
            other_ca_pem: other.pem(),
            stranger_cert_pem: stranger.pem(),
            stranger_key_pem: str_key.serialize_pem(),
        }
    }
}
