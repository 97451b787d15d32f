"""Facts about the engine and the process: session, JVM options, file systems, logs, signals."""
