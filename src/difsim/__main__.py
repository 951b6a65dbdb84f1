"""`python -m difsim`: the same as the `difsim` command."""

from difsim._app import main

raise SystemExit(main())
