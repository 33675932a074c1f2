-- The MySQL tests' user (`make mysql-server` runs this as root). It may create and drop any database whose name
-- starts with sendonce_test: each test run makes its own (one a worker, tests/sql_databases.py), so two runs on one
-- machine (make test beside make test-stress) never reset each other's tables.
CREATE USER IF NOT EXISTS 'sendonce'@'localhost' IDENTIFIED BY 'sendonce';
CREATE USER IF NOT EXISTS 'sendonce'@'127.0.0.1' IDENTIFIED BY 'sendonce';
CREATE DATABASE IF NOT EXISTS sendonce_test;
GRANT ALL ON `sendonce\_test%`.* TO 'sendonce'@'localhost';
GRANT ALL ON `sendonce\_test%`.* TO 'sendonce'@'127.0.0.1';
