"""Scale out on existing engines: Dagster on PostgreSQL, steps on Celery workers, one shared rate limit.

servers.py starts local PostgreSQL and Redis from pip packages (tests, demo); instance.py writes the
PostgreSQL instance config; definitions.py is the code location with the Celery executor;
celery_app.py is what the workers run; processes.py starts and stops them by process id; demo.py is
``make cluster-demo``.
"""
