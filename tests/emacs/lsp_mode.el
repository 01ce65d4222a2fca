;;; lsp_mode.el --- agentls as an lsp-mode add-on server -*- lexical-binding: t -*-

;; Driven by tests/editor_emacs.rs: a real Emacs 28 with Debian's lsp-mode loads the shipped
;; editors/emacs/agentls-lsp.el as its README says, and opens a Python file with `M-x lsp': a
;; real pylsp and agentls both serve it. With an unsaved edit in the buffer, `agentls-lsp-prompt'
;; asks the agent, whose two changes show as diagnostics; the first is accepted and the second
;; rejected through lsp-mode's code actions. Then `agentls-lsp-chat' opens the chat, which
;; agentls serves. Emacs is kept busy right after sending the prompt and the rejection, so that
;; agentls's reply and what follows it would reach lsp-mode in one read (as on a loaded machine),
;; which lsp-mode drops after the reply unless agentls paces its replies. Prints ONE JSON line on stdout; the Rust side makes the assertions.
;;
;;   emacs --batch -q --no-site-file -l lsp_mode.el AGENTLS_LSP_EL SAMPLE ARTIFACT_DIR

(load (expand-file-name "harness.el" (file-name-directory load-file-name)) nil t)

(defvar test-args (prog1 command-line-args-left (setq command-line-args-left nil)))
(defvar test-agentls-lsp-el (nth 0 test-args))
(defvar test-sample (nth 1 test-args))
(defvar test-artifacts (nth 2 test-args))
(unless test-artifacts
  (error "usage: lsp_mode.el AGENTLS_LSP_EL SAMPLE ARTIFACT_DIR"))

(test-watchdog 50)

(defun test-servers ()
  "The server ids of the current buffer's lsp-mode workspaces, once all are initialized."
  (let ((workspaces (lsp-workspaces)))
    (and workspaces
         (cl-every (lambda (w) (eq (lsp--workspace-status w) 'initialized)) workspaces)
         (mapcar (lambda (w) (symbol-name (lsp--client-server-id (lsp--workspace-client w))))
                 workspaces))))

(defun test-agentls-diagnostics ()
  (cl-loop for d in (gethash buffer-file-name (lsp-diagnostics t))
           when (string-match-p "demo proposes" (lsp:diagnostic-message d))
           collect (lsp:diagnostic-message d)))

(defun test-save-logs ()
  "Keep agentls's stderr and lsp-mode's wire log as the artifacts the Rust side prints."
  (dolist (buffer (buffer-list))
    (let* ((name (buffer-name buffer))
           (file (cond ((string-match-p "agentls::stderr" name) "agentls.stderr")
                       ((string-match-p "lsp-log: agentls" name) "eglot-events.log"))))
      (when file
        (with-current-buffer buffer
          (write-region (format "--- %s\n" name) nil (expand-file-name file test-artifacts) t 'quiet)
          (write-region nil nil (expand-file-name file test-artifacts) t 'quiet))))))

(defun test-busy-after-next-command ()
  "Keep Emacs busy for 0.3 s once it has sent the next workspace/executeCommand, as a loaded
machine may: the server's reply and what follows it arrive in one read."
  (advice-add 'process-send-string :after #'test--busy-once))

(defun test--busy-once (_process string)
  (when (string-match-p "workspace/executeCommand" string)
    (advice-remove 'process-send-string #'test--busy-once)
    (call-process "sleep" nil nil nil "0.3")))

(defun test-code-action (prefix &optional busy)
  "Run the code action at point whose title starts with PREFIX; return its title.
BUSY: Emacs is busy for a moment once it has sent the command."
  (let* ((actions (lsp-code-actions-at-point))
         (action (cl-find-if (lambda (a) (string-prefix-p prefix (lsp:code-action-title a)))
                             actions)))
    (unless action
      (error "No code action %S among %S" prefix (mapcar #'lsp:code-action-title actions)))
    (when busy
      (test-busy-after-next-command))
    (lsp-execute-code-action action)
    (lsp:code-action-title action)))

(condition-case err
    (progn
      (package-activate-all)            ; Debian's elpa-lsp-mode lives in the system package dir
      (require 'lsp-mode)
      (test-put 'lsp_mode_version (or (ignore-errors (lsp-version)) "?"))
      (setq lsp-session-file (expand-file-name "lsp-session" test-artifacts)
            lsp-log-io t
            lsp-auto-guess-root t
            lsp-enable-file-watchers nil)
      ;; As the README says (the path is the clone's).
      (add-to-list 'load-path (file-name-directory test-agentls-lsp-el))
      (with-eval-after-load 'lsp-mode (require 'agentls-lsp))

      (find-file test-sample)
      (test-put 'major_mode (symbol-name major-mode))
      (lsp)
      (test-put 'servers (vconcat (test-wait-for "pylsp and agentls" #'test-servers 30)))

      (goto-char (point-min))
      (end-of-line)
      (insert "  # mine")
      (test-busy-after-next-command)
      (agentls-lsp-prompt "uppercase the TODO lines in notes.py")
      (test-wait-for "the proposal as diagnostics"
                     (lambda () (= (length (test-agentls-diagnostics)) 2))
                     20)
      ;; Where the reply goes, said right behind the prompt's reply (a message lsp-mode drops
      ;; when it comes in the same read). It goes out apart from the diagnostics.
      (test-put 'told_where_it_answers
                (or (test-eventually
                     (lambda ()
                       (cl-some (lambda (buffer)
                                  (and (string-match-p "lsp-log: agentls" (buffer-name buffer))
                                       (with-current-buffer buffer
                                         (save-excursion
                                           (goto-char (point-min))
                                           (and (search-forward "demo answers in" nil t) t)))))
                                (buffer-list))))
                    :json-false))
      (test-goto "TODO buy")
      (test-put 'accepted (test-code-action "Accept change"))
      (test-goto "TODO call")
      ;; lsp-mode's synchronous request leaves its process filter at the reply, dropping what
      ;; came in the same read: the agent's write of the accepted change (an applyEdit) right
      ;; behind this reply must come in a read of its own.
      (test-put 'rejected (test-code-action "Reject change" 'busy))
      (test-wait-for "the accepted change in the buffer"
                     (lambda () (let ((case-fold-search nil))
                                  (string-match-p "TODO BUY" (test-buffer-text))))
                     10)
      (test-wait-for "the review to end" (lambda () (null (test-agentls-diagnostics))) 10)
      (test-put 'buffer (test-buffer-text))
      (test-put 'modified (buffer-modified-p))
      (test-put 'disk (test-disk test-sample))

      (agentls-lsp-chat)
      (test-put 'chat_first_line (buffer-substring-no-properties (point-min)
                                                                 (line-end-position)))
      (test-put 'questions (vconcat test-confirmations test-supersession-questions)))
  (error (test-put 'error (format "%S" err))
         (test-save-logs)))

(test-print-result)
(test-exit (if (alist-get 'error test-output) 1 0))
