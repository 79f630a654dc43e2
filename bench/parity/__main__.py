from bench.parity.cli import main

raise SystemExit(main())
