# Reports that read at any size (issue 38): five sweeps (seven tricks, a 60-run grid, a
# 40-trial tpe search, successive halving, a program with held-out rows and metrics of its
# own) rendered by `sweep report`, laid out by headless Chromium at 1400 px and measured
# through the DOM (tests/python/test_report_views.py); a PNG of each goes to
# $SWEEP_REPORT_SHOTS (default /tmp/report-shots). Skipped (77) without chromium.
add_test(NAME report_views COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/test_report_views.py
                                   ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(report_views PROPERTIES LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 900
                                             ENVIRONMENT PYTHONPATH=${CMAKE_SOURCE_DIR}/python)
