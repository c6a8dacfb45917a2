"""`bands.csv`: data preparation's per-task probe tallies and difficulty bands, one row per
candidate task. Written by trainer/data/prepare.py (`bands_csv_text`), read back by the online
difficulty sampler (trainer/verl/difficulty.py) and the report (trainer/eval/report.py) through
`read_bands_csv`; the columns are defined here once.

Columns, in order: `uid, dataset, domain, n, k, system_errors, band`, one `mass_<band>` per band
(the band's Jeffreys posterior mass, 6 decimals; all empty when the task has no probes), then
`kept, split, reason`:

    n, k, system_errors   valid probes, of them passed, attempts with a system error (integers)
    band                  the band of the largest mass ("" when not banded)
    kept                  yes | no
    split                 train | validation | "" (not kept)
    reason                why it was not kept ("" when kept)

A reader names the columns it needs (`need`); the others may be absent (a hand-written file of
`uid,n,k` is enough for the sampler) and read as empty. Every fault is a `BandsFileError` naming
the file, the line and the column.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

CSV_COLUMNS = ("uid", "dataset", "domain", "n", "k", "system_errors", "band", "kept", "split", "reason")
MASSES_AFTER = 7  # the mass_<band> columns go after CSV_COLUMNS[:7]
MASS_PREFIX = "mass_"
INT_COLUMNS = ("n", "k", "system_errors")


class BandsFileError(ValueError):
    """A bands.csv that cannot be read (`file: line N: column: what`)."""


@dataclass(frozen=True)
class BandsRow:
    uid: str
    dataset: str = ""
    domain: str = ""
    n: int = 0
    k: int = 0
    system_errors: int = 0
    band: str = ""
    masses: dict[str, float] | None = None  # band -> posterior mass; None when not probed
    kept: bool = False
    split: str = ""
    reason: str = ""
    line: int = 0  # in the file read (0 when built to be written)


@dataclass
class BandsFile:
    path: Path
    columns: list[str]
    bands: list[str]  # band names of the mass_ columns, in order
    rows: list[BandsRow] = field(default_factory=list)


def header(bands: Sequence[str]) -> list[str]:
    return [*CSV_COLUMNS[:MASSES_AFTER], *(f"{MASS_PREFIX}{b}" for b in bands), *CSV_COLUMNS[MASSES_AFTER:]]


def bands_csv_text(bands: Sequence[str], rows: Iterable[BandsRow]) -> str:
    """The file's text: the header for these band names, then one line per row."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header(bands))
    for r in rows:
        masses = [f"{r.masses[b]:.6f}" for b in bands] if r.masses else [""] * len(bands)
        w.writerow([r.uid, r.dataset, r.domain, r.n, r.k, r.system_errors, r.band, *masses,
                    "yes" if r.kept else "no", r.split, r.reason])
    return buf.getvalue()


def read_bands_csv(path: str | Path, need: Sequence[str] = CSV_COLUMNS) -> BandsFile:
    """Every row of a bands.csv; `need`: the columns that must be there (`uid` always)."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return _read(path, f, need)
    except OSError as e:
        raise BandsFileError(f"{path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise BandsFileError(f"{path}: not UTF-8 text ({e.reason})") from None
    except csv.Error as e:
        raise BandsFileError(f"{path}: not CSV ({e})") from None


def _read(path: Path, f: io.TextIOBase, need: Sequence[str]) -> BandsFile:
    reader = csv.reader(f)
    cols = next(reader, [])
    missing = [c for c in dict.fromkeys(["uid", *need]) if c not in cols]
    if missing:
        raise BandsFileError(f"{path}: line 1: missing column(s) {', '.join(missing)} "
                             "(a bands.csv of data/prepare_data.py)")
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise BandsFileError(f"{path}: line 1: column(s) {', '.join(dup)} given twice")
    bands = [c[len(MASS_PREFIX):] for c in cols if c.startswith(MASS_PREFIX)]
    out = BandsFile(path, cols, bands)
    for values in reader:
        line = reader.line_num
        if not values:
            continue
        if len(values) != len(cols):
            raise BandsFileError(f"{path}: line {line}: {len(values)} field(s), the header has {len(cols)}")
        out.rows.append(_row(dict(zip(cols, values)), bands, f"{path}: line {line}", line))
    return out


def _row(v: dict[str, str], bands: list[str], where: str, line: int) -> BandsRow:
    if not v["uid"]:
        raise BandsFileError(f"{where}: uid: empty")
    ints = {}
    for c in INT_COLUMNS:
        text = v.get(c, "").strip()
        try:
            ints[c] = int(text) if text else 0
        except ValueError:
            raise BandsFileError(f"{where}: {c}: expected an integer, got {text!r}") from None
        if ints[c] < 0:
            raise BandsFileError(f"{where}: {c}: expected an integer >= 0, got {text!r}")
    if ints["k"] > ints["n"]:
        raise BandsFileError(f"{where}: k: {ints['k']} passed of n={ints['n']} probes")
    masses: dict[str, float] | None = None
    texts = {b: v[MASS_PREFIX + b].strip() for b in bands}
    if any(texts.values()):
        masses = {}
        for b, text in texts.items():
            try:
                masses[b] = float(text)
            except ValueError:
                raise BandsFileError(f"{where}: {MASS_PREFIX}{b}: expected a number, got {text!r}") from None
    band = v.get("band", "").strip()
    if band and bands and band not in bands:
        raise BandsFileError(f"{where}: band: {band!r} is not one of the mass_ columns ({', '.join(bands)})")
    kept = v.get("kept", "no")
    if kept not in ("yes", "no"):
        raise BandsFileError(f"{where}: kept: expected yes or no, got {kept!r}")
    return BandsRow(uid=v["uid"], dataset=v.get("dataset", ""), domain=v.get("domain", ""), **ints, band=band,
                    masses=masses, kept=kept == "yes", split=v.get("split", ""), reason=v.get("reason", ""), line=line)


__all__ = ["CSV_COLUMNS", "BandsFile", "BandsFileError", "BandsRow", "bands_csv_text", "header", "read_bands_csv"]
