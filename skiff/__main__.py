from skiff.cli.main import main

raise SystemExit(main())
