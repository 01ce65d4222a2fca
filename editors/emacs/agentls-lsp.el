;;; agentls-lsp.el --- agentls as an lsp-mode add-on server -*- lexical-binding: t -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (lsp-mode "8.0"))
;; Keywords: tools, languages

;;; Commentary:

;; For lsp-mode users: agentls runs as an add-on server next to each buffer's own server
;; (pylsp, rust-analyzer, ...), which lsp-mode supports natively.  An agent's proposed changes
;; show as diagnostics from agentls, and lsp-mode's code actions (`lsp-execute-code-action',
;; `s-l a a') offer Accept / Reject for each change and the file; your unsaved edits are kept.
;; The commands below open a chat, ask the agent and send a chat's message.
;;
;;   (with-eval-after-load 'lsp-mode (require 'agentls-lsp))
;;
;; The eglot package (agentls.el) adds the mode line, the region as context and more; this file
;; is what lsp-mode needs and nothing else.

;;; Code:

(require 'cl-lib)
(require 'lsp-mode)

(defgroup agentls-lsp nil
  "agentls as an lsp-mode add-on server."
  :group 'lsp-mode
  :prefix "agentls-lsp-")

(defcustom agentls-lsp-server-command '("agentls")
  "How lsp-mode runs agentls: the program and its arguments."
  :type '(repeat string))

(lsp-register-client
 (make-lsp-client
  :new-connection (lsp-stdio-connection (lambda () agentls-lsp-server-command))
  ;; Every file: agentls serves whatever an agent may change.
  :activation-fn (lambda (file-name &rest _) (and file-name t))
  :add-on? t
  :priority -1
  ;; lsp-mode's synchronous requests (code actions, commands) leave its process filter at the
  ;; reply and drop what came in the same read: agentls holds what follows a reply until
  ;; Emacs has read it.
  :initialization-options (lambda () (list :paceReplies t))
  :server-id 'agentls))

(defun agentls-lsp--execute (command &optional argument)
  "Run agentls's workspace COMMAND with ARGUMENT (a plist) and return its result."
  (let ((workspace (cl-find-if (lambda (w) (eq (lsp--client-server-id (lsp--workspace-client w))
                                               'agentls))
                               (lsp-workspaces))))
    (unless workspace
      (user-error "agentls is not running for this buffer (M-x lsp)"))
    (with-lsp-workspace workspace
      (lsp-request "workspace/executeCommand"
                   (list :command command :arguments (if argument (vector argument) []))))))

(defun agentls-lsp-chat ()
  "Open the default agent's latest chat of this project, or a new one."
  (interactive)
  (let ((opened (agentls-lsp--execute "agentls.openChat")))
    (find-file-other-window (lsp-get opened :path))
    (unless (bound-and-true-p lsp-mode) (lsp))))

(defun agentls-lsp-prompt (text)
  "Ask the agent TEXT; the region, when active, goes along as context."
  (interactive (list (read-string (if (use-region-p) "Ask the agent about the region: "
                                    "Ask the agent: "))))
  (agentls-lsp--execute
   "agentls.prompt"
   (append (list :text text)
           (when (use-region-p)
             (list :uri (lsp--buffer-uri)
                   :range (lsp--region-to-range (region-beginning) (region-end)))))))

(defun agentls-lsp-send ()
  "Send what is under the last `## You' of this chat."
  (interactive)
  (agentls-lsp--execute "agentls.send" (list :uri (lsp--buffer-uri))))

(provide 'agentls-lsp)
;;; agentls-lsp.el ends here
