"""`python -m difsim`: the same as the `difsim` command."""

from difsim._cli import main

raise SystemExit(main())
