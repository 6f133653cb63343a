"""``python -m dex_devserver`` runs the command line."""

import sys

from ._cli import main

sys.exit(main())
