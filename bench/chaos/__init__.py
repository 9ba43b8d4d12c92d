"""The chaos run: a seeded fault plan (plan.py), its executor (executor.py), the source churn and foreign
records (churn.py), and the run with its verdict (run.py), shared by `python -m bench --only chaos` and
tests/multiprocess/test_chaos.py."""
