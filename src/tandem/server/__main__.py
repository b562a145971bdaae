"""``python -m tandem.server``: run the train server in the foreground."""

from __future__ import annotations

import sys

from tandem.server.daemon import main_foreground

if __name__ == "__main__":
    sys.exit(main_foreground(sys.argv[1:]))
