"""translab's steps in nbgrader's own pipelines, one class per file named after it, as ``nbgrader_config.py``
lists them (nbgrader lays out its ``preprocessors/`` the same way).

Autograde (``c.Autograde.*``):
    ``batch_autograde_exporter``  the exporter: plain nbgrader and the formgrader grade through the batch
    ``record_variant_shown``      sanitize step: the variant code the outputs show, before ClearOutput
    ``record_submitted_figures``  sanitize step: the figures of an own-run notebook's outputs (``grader.course.own_run``)
    ``guarded_execute``           nbgrader's Execute with a notebook budget, a kept kernel and verdicts from outside
    ``note_own_run``              after the re-run: the grader's note under an own-run written answer
    ``flag_incidents``            after SaveAutoGrades: flags a notebook whose grading was cut short
    ``sanitize_student_content``  last: no live student HTML on disk (again before feedback)
    ``check_cell_metadata_precompiled``  both conversions: nbgrader's metadata check, its schema checked once
Release (``c.GenerateAssignment.preprocessors``):
    ``remove_after_grading``      cells shown only after grading are not released (``grader.course.after_grading``)
    ``add_code_interview``        the code interview's task cell, where the course gives it points
                                  (``grader.course.code_interview``)
Feedback (``c.GenerateFeedback.*``):
    ``feedback_gate_exporter``    the exporter: no ungraded answer released as 0 unless the instructor says so
    ``remove_grader_notes``       first: the grader's notes are not the student's
    ``hide_hidden_test_tracebacks``, ``clear_outputs_after_hidden_tests``, ``sanitize_student_content``,
    ``show_after_grading``, ``demote_headings`` (the page's one h1 is its score)
"""
