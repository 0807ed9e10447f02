#!/usr/bin/env python3
"""Throwaway certificates for the TLS tests (ECDSA P-256): mkcerts.py DIR writes
ca1/ca2 (CAs), srv1 (CA1, SAN IP 127.0.0.1 and DNS agent.test), srv2 (the same from CA2),
srv-expired (CA1, validity ended yesterday), srv-noip (CA1, SAN DNS other.test only),
cli1 (CA1, client auth), cli2 (the same from CA2); each as NAME.crt and NAME.key (PEM)."""
import datetime
import ipaddress
import os
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

D = sys.argv[1]
NOW = datetime.datetime.now(datetime.timezone.utc)


def write(name, cert, key):
    with open(os.path.join(D, name + ".crt"), "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(D, name + ".key"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()))


def make(cn, issuer=None, ca=False, sans=None, usage=None, start=None, end=None):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    b = (x509.CertificateBuilder().subject_name(name)
         .issuer_name(issuer[0].subject if issuer else name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(start or NOW - datetime.timedelta(days=1))
         .not_valid_after(end or NOW + datetime.timedelta(days=30))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usage:
        b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    cert = b.sign(issuer[1] if issuer else key, hashes.SHA256())
    return cert, key


ca1 = make("pillar test CA 1", ca=True)
ca2 = make("pillar test CA 2", ca=True)
write("ca1", *ca1)
write("ca2", *ca2)
ip = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("agent.test")]
srv = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
write("srv1", *make("agent", ca1, sans=ip, usage=srv))
write("srv2", *make("agent", ca2, sans=ip, usage=srv))
write("srv-expired", *make("agent", ca1, sans=ip, usage=srv,
                           start=NOW - datetime.timedelta(days=30),
                           end=NOW - datetime.timedelta(days=1)))
write("srv-noip", *make("agent", ca1, sans=[x509.DNSName("other.test")], usage=srv))
write("cli1", *make("controller", ca1, usage=[ExtendedKeyUsageOID.CLIENT_AUTH]))
write("cli2", *make("controller", ca2, usage=[ExtendedKeyUsageOID.CLIENT_AUTH]))
