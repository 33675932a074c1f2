"""`sendonce-local demo`: the example app deployed to the emulator with the real CDK CLI (``example_app``), driven
through its phases (``phases``: traffic with crashes, the residual, bursts, fault bursts, the app's outcome events)
by ``run``; the load scenarios the phases and the benchmarks share (``scenarios``), the traffic (``workload``), and
the report (``report``: the verdict; ``report_build``, ``report_text``, ``report_chart``)."""
