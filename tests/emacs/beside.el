;;; beside.el --- agentls beside the user's own language server -*- lexical-binding: t -*-

;; Driven by tests/editor_emacs.rs: a real Emacs loads the shipped editors/emacs/agentls.el,
;; joins agentls to a real Python language server with `(agentls-beside 'python-mode "pylsp")'
;; as the README says, and opens a Python file as a user does (`M-x eglot'). In that buffer,
;; which pylsp serves (its hover answers), the user types an unsaved edit and asks from the chat
;; (`agentls-chat', `agentls-send': the chat joins the same connection); the agent proposes two
;; changes, the first is accepted and the second rejected from eglot's code action menu. Prints
;; ONE JSON line on stdout; the Rust side makes the assertions.
;;
;;   emacs --batch -q --no-site-file -l beside.el AGENTLS_EL SAMPLE ARTIFACT_DIR

(load (expand-file-name "harness.el" (file-name-directory load-file-name)) nil t)

(defvar test-args (prog1 command-line-args-left (setq command-line-args-left nil)))
(defvar test-agentls-el (nth 0 test-args))
(defvar test-sample (nth 1 test-args))
(defvar test-artifacts (nth 2 test-args))
(unless test-artifacts
  (error "usage: beside.el AGENTLS_EL SAMPLE ARTIFACT_DIR"))

(test-watchdog 45)

(defvar test-server nil)

(defun test-agentls-diagnostics ()
  (cl-loop for d in (flymake-diagnostics)
           when (string-prefix-p "agentls" (flymake-diagnostic-text d))
           collect (flymake-diagnostic-text d)))

(condition-case err
    (progn
      (package-activate-all)            ; Debian's elpa-eglot lives in the system package dir
      (require 'eglot)
      (test-put 'emacs_version emacs-version)
      (load test-agentls-el nil t)
      ;; As the README says.
      (agentls-beside 'python-mode "pylsp")

      (find-file test-sample)
      (test-put 'major_mode (symbol-name major-mode))
      (call-interactively #'eglot)
      (setq test-server (test-wait-for "eglot to connect"
                                       (lambda () (and (eglot-managed-p) (eglot-current-server)))
                                       20))
      (test-put 'server_class (symbol-name (eieio-object-class test-server)))
      (test-put 'server_command (vconcat (process-command (jsonrpc--process test-server))))

      ;; pylsp answers: its hover on `os`.
      (test-goto "os" t)
      (backward-char)
      (let ((hover (jsonrpc-request test-server :textDocument/hover
                                    (eglot--TextDocumentPositionParams))))
        (test-put 'hover (format "%S" (plist-get hover :contents))))

      ;; An unsaved edit of the user's; then, from the chat (`C-c a c'), the message that gets
      ;; the agent's proposal, sent with `C-c C-c'.
      (goto-char (point-min))
      (end-of-line)
      (insert "  # mine")
      (test-idle)
      (let ((code (current-buffer)))
        (with-current-buffer (agentls-chat)
          (test-put 'chat_managed_by_the_same_server (eq (eglot-current-server) test-server))
          (goto-char (point-max))
          (insert "uppercase the TODO lines in notes.py")
          (test-idle)
          (agentls-send))
        (set-buffer code))
      (test-put 'servers_in_project
                (length (gethash (eglot--project test-server) eglot--servers-by-project)))
      (test-wait-for "the proposal as flymake notes"
                     (lambda () (test-idle) (= (length (test-agentls-diagnostics)) 2))
                     20)
      (test-put 'diagnostics (vconcat (test-agentls-diagnostics)))
      (test-goto "TODO buy")
      (test-put 'accepted (test-pick-action "Accept change" (line-beginning-position)
                                            (line-end-position)))
      (test-goto "TODO call")
      (test-put 'rejected (test-pick-action "Reject change" (line-beginning-position)
                                            (line-end-position)))
      (test-wait-for "the review to end"
                     (lambda () (test-idle)
                       (and (null (test-agentls-diagnostics))
                            (let ((case-fold-search nil))
                              (string-match-p "TODO BUY" (test-buffer-text)))))
                     10)
      (test-put 'buffer (test-buffer-text))
      (test-put 'modified (buffer-modified-p))
      (test-put 'disk (test-disk test-sample))
      (test-put 'questions (vconcat test-confirmations test-supersession-questions)))
  (error (test-put 'error (format "%S" err))))

(test-save-logs test-server test-artifacts)
(test-print-result)
(test-exit (if (alist-get 'error test-output) 1 0))
