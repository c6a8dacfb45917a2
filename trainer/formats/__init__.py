"""The on-disk formats, each read and written in one place: the episode record (`record.py`) and its
identity (`identity.py`), records (ours and `tb infer`'s) as attempts and tallies (`attempts.py`),
difficulty bands (`bandsfile.py`, `bands.csv`), the aggregate (`aggfile.py`, `agg.json`) and the
coverage check it carries (`coverage.py`: every task × repetition scored once), and the ThinkingBox
framework's config file (`tbconfig.py`).

A layer of its own, above `core` and `env` and below everything that reads these files (rollout,
data, eval, verl, serve, the CLI), so that every consumer imports the one reader instead of a
copy kept in whichever package happened to write the file first."""
