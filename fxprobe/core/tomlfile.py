"""Reading the TOML files users hand to fxprobe (profiles, fault scenarios, gates, claims, references).

Every failure is one BadInput line that names the file and says what kind of file was expected.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from fxprobe.core.errors import BadInput


def read_text(path: Path | str, what: str) -> str:
    """The text of ``path``; BadInput names ``what`` (e.g. "profile file") when it cannot be read."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: {what} does not exist") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a folder, not a {what}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path}: {what} is not UTF-8 text") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror})") from None


def parse_toml(text: str, source: str) -> dict:
    """Parsed TOML; BadInput with the parser's line and column when it is not valid TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: not valid TOML ({exc})") from None


def read_toml(path: Path | str, what: str) -> dict:
    return parse_toml(read_text(path, what), str(path))
