"""The embedded AWS emulator: moto's server (``server``), made faithful where sendonce needs it by the patches that
``patches`` lists (what each one patches and why), and what the emulator lacks played beside it: SES's sending rate
(``ses_limits``), SES's event publishing (``ses_publisher``), SES's own stops (``ses_account``, ``ses_tenants``,
over ``ses_api``), and slow or refusing services (``proxy``, ``slow_services``)."""
