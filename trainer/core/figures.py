"""A matplotlib figure as PNG bytes, the same way for every plot the project writes (bands.png,
the online-difficulty trace, the reward curve): laid out tight, no software tag in the metadata
(the same figure gives the same bytes), and the figure closed."""

from __future__ import annotations

import io
from typing import Any


def figure_png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


__all__ = ["figure_png"]
