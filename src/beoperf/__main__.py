from beoperf.cli import run

run()
