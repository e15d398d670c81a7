from pivot.cli import main

raise SystemExit(main())
