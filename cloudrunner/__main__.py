from cloudrunner.cli import main

raise SystemExit(main())
