"""Ed25519 signatures over a report's manifest (library ``cryptography``).

Keys are PEM files: the private key PKCS#8 (written 0600, never overwritten), the public key
SubjectPublicKeyInfo. A key's fingerprint is the first 16 hex digits of SHA-256 over its raw
32 public bytes.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fxprobe.core.errors import BadInput


def generate_keypair(private_path: Path, public_path: Path) -> str:
    """Write a new key pair; returns the public key's fingerprint. Refuses to overwrite."""
    private_path, public_path = Path(private_path), Path(public_path)
    for path in (private_path, public_path):
        if path.exists():
            raise BadInput(f"{path}: already exists; refusing to overwrite a key", hint="choose another path")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    private_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    public_path.parent.mkdir(parents=True, exist_ok=True)
    public_path.write_bytes(public_pem(key.public_key()))
    return fingerprint(key.public_key())


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def fingerprint(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except FileNotFoundError:
        raise BadInput(f"{path}: private key not found", hint="make one with `fxprobe report keygen`") from None
    except (ValueError, TypeError) as exc:
        raise BadInput(f"{path}: not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput(f"{path}: not an Ed25519 key ({type(key).__name__})")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except FileNotFoundError:
        raise BadInput(f"{path}: public key not found") from None
    except ValueError as exc:
        raise BadInput(f"{path}: not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise BadInput(f"{path}: not an Ed25519 key ({type(key).__name__})")
    return key


def sign(key: Ed25519PrivateKey, data: bytes) -> str:
    """Base64 text of the signature (what goes in ``manifest.sig``)."""
    return base64.b64encode(key.sign(data)).decode("ascii")


def verify(key: Ed25519PublicKey, data: bytes, signature_text: str) -> bool:
    """True only for a valid signature written exactly as :func:`sign` writes it (one optional newline).

    The exact-text rule makes every byte of ``manifest.sig`` count: base64 would otherwise
    ignore a changed unused bit in the last character or a newline turned into a space.
    """
    text = signature_text[:-1] if signature_text.endswith("\n") else signature_text
    try:
        signature = base64.b64decode(text, validate=True)
        if base64.b64encode(signature).decode("ascii") != text:
            return False
        key.verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True
