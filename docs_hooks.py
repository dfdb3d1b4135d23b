"""MkDocs hooks for the docs site (mkdocs.yml `hooks:`), which is built to be opened from disk (`file://`).

The theme writes a `404.html` whose links are root-absolute (`/assets/...`), for a web server that shows it at any
path: opened from disk those links lead nowhere, and no 404 page is ever shown there. It is not published.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def on_post_build(config: Any, **kwargs: Any) -> None:
    """Remove the theme's `404.html` from the built site."""
    (Path(config['site_dir']) / '404.html').unlink(missing_ok=True)
