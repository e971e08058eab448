# Reports that read at any size (issue 38): five sweeps (seven tricks, a 60-run grid, a
# 40-trial tpe search, successive halving, a program with held-out rows and metrics of its
# own) rendered by `sweep report`, laid out by headless Chromium at 1400 px and measured
# through the DOM (tests/python/test_report_views.py); a PNG of each goes to
# $SWEEP_REPORT_SHOTS (default /tmp/report-shots). Skipped (77) without chromium.
add_test(NAME report_views COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/test_report_views.py
                                   ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(report_views PROPERTIES LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 900
                                             ENVIRONMENT PYTHONPATH=${CMAKE_SOURCE_DIR}/python)

# The report of a real seven-tricks sweep (24 steps; fp32, bf16 and fp16 runs) at 1400 px
# (issue 55): every results column in view, every curve point inside its plot (the loss
# scale on a log axis), runs tables one line a run, the page titled with the sweep's name
# (tests/python/test_report_layout.py). Needs sweep-train; skipped (77) without chromium.
if(SWEEP_BUILD_TRAINER)
  add_test(NAME report_layout COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/test_report_layout.py
                                      ${CMAKE_BINARY_DIR}/bin)
  set_tests_properties(report_layout PROPERTIES LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 600
                                                ENVIRONMENT PYTHONPATH=${CMAKE_SOURCE_DIR}/python)
endif()
