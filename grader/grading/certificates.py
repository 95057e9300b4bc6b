"""TLS certificates for a Dask cluster: an authority and one certificate it signed, which the scheduler, the
workers and the client all present (Dask's mutual TLS).  A Dask scheduler runs any code a client sends it, so the
warm grader (``grader.grading.warm_grader``) listens only with these, kept where only the instructor reads."""
from __future__ import annotations

import datetime
from pathlib import Path


def certificates(folder: Path, name: str = "course") -> dict[str, str]:
    """A certificate authority and one certificate it signed, valid for a day, in ``folder`` (the key readable by
    its owner only): {"tls_ca_file", "tls_client_cert", "tls_client_key"}, as a cluster spec's ``security``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} grading CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True).sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} grading")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False).sign(ca_key, hashes.SHA256()))
    files = {"tls_ca_file": folder / f"{name}-ca.pem", "tls_client_cert": folder / f"{name}.pem",
             "tls_client_key": folder / f"{name}-key.pem"}
    files["tls_ca_file"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files["tls_client_cert"].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    files["tls_client_key"].touch(mode=0o600)
    files["tls_client_key"].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    return {key_name: str(path) for key_name, path in files.items()}
