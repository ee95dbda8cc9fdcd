"""`python -m genenv_cli ...` runs the CLI; `accelerate launch -m genenv_cli update-agent ...` too.

The guard matters: processes started with `spawn` (vLLM's engine workers, multiprocessing) import the parent's
main module again, as `__mp_main__`; without it each of them would run the whole command once more."""

from genenv_cli.cli import main

if __name__ == "__main__":
    main()
