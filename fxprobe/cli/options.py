"""Option types shared by several commands."""

from __future__ import annotations

import click


class IntList(click.ParamType):
    """A comma-separated list of positive integers, with K/M/G suffixes (binary) for sizes."""

    name = "list"
    _SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        out = []
        for part in str(value).split(","):
            part = part.strip().lower()
            scale = self._SUFFIX.get(part[-1:], 1)
            digits = part[:-1] if scale != 1 else part
            if not digits.isdigit() or int(digits) == 0:
                self.fail(f"{value!r}: expected positive integers separated by commas (K/M/G allowed)", param, ctx)
            out.append(int(digits) * scale)
        return out


INT_LIST = IntList()
lab_option = click.option("--lab", "lab", default=None, metavar="NAME",
                          help="Node names are guests of this running lab (e.g. array, host1); 'default' for the default lab.")
