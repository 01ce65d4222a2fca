;;; agentls.el --- Coding agents in Emacs through the agentls language server -*- lexical-binding: t -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: tools, convenience, languages
;; URL: https://github.com/agentls/agentls

;; This file is not part of GNU Emacs.

;;; Commentary:

;; agentls is a language server that brings coding agents (ACP agents it
;; starts, terminal agents such as `claude' and `gemini') into any editor that
;; speaks LSP.  This package attaches it with eglot and adds what eglot alone
;; cannot do:
;;
;; - `agentls-chat' opens a conversation with an agent: a markdown document in
;;   which you write under the last "## You" heading and send with
;;   `agentls-send' (C-c C-c in the chat); the reply streams in below.
;; - `agentls-prompt' asks the agent from any buffer (the active region goes
;;   along as context); the reply goes to the agent's latest chat.
;; - `agentls-cancel' stops the agent's turn; `agentls-set-mode' picks one of
;;   the agent's modes; `agentls-status' tells the agents and their state.
;; - A mode-line lighter shows the agent, its state and the pending changes.
;; - The region (or point) is sent to agentls as you move, so "the code I
;;   selected" is what an agent sees.
;; - agentls's own edits (accepted changes, chat replies) apply without the
;;   y/n question eglot asks for other servers' edits.
;; - A chat document, which lives outside your project, is served by the
;;   agentls of the project that opened it.
;;
;; An agent's proposed changes are flymake diagnostics; accept or reject each
;; with `eglot-code-actions'.  Suggested keys:
;;
;;   (define-key global-map (kbd "C-c a") agentls-command-map)
;;
;; See editors/emacs/README.md in the agentls repository.

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)
(require 'project)
(require 'subr-x)

;; eglot internals used here exist, with these meanings, from eglot 1.9 to
;; the eglot of Emacs 30.
(defvar eglot--servers-by-project)
(defvar eglot--managed-mode)
(declare-function eglot--current-project "eglot")
(declare-function eglot--project "eglot")
(declare-function eglot--pos-to-lsp-position "eglot")
(declare-function eglot--TextDocumentIdentifier "eglot")
(declare-function eglot--signal-textDocument/didChange "eglot")
(declare-function eglot--server-info "eglot")
(declare-function eglot--managed-buffers "eglot")
(declare-function package-installed-p "package")

;;;; Settings

(defgroup agentls nil
  "Coding agents through the agentls language server."
  :group 'tools
  :prefix "agentls-"
  :link '(url-link :tag "README" "https://github.com/agentls/agentls/tree/main/editors/emacs"))

(defcustom agentls-server-command '("agentls")
  "How to run agentls: the program and its arguments."
  :type '(repeat string))

(defun agentls--contact (&optional _interactive _project)
  "The eglot contact of agentls: its class and `agentls-server-command'."
  (cons 'agentls-server agentls-server-command))

(defun agentls--register (&optional modes)
  "Put agentls first in `eglot-server-programs' for MODES and chat documents.
MODES defaults to `agentls-major-modes'."
  (setq eglot-server-programs
        (cl-remove-if (lambda (entry) (eq (cdr-safe entry) #'agentls--contact))
                      eglot-server-programs))
  (push (cons (cons 'agentls-chat-mode
                    (or modes (and (boundp 'agentls-major-modes) agentls-major-modes)))
              #'agentls--contact)
        eglot-server-programs))

(defcustom agentls-major-modes '(text-mode markdown-mode org-mode)
  "Major modes whose buffers agentls serves alone (besides its chat documents).
Eglot gives a buffer one server: list modes that have no other server, and
join agentls to the others' with `agentls-beside'."
  :type '(repeat symbol)
  :set (lambda (symbol value)
         (set-default symbol value)
         (when (featurep 'agentls) (agentls--register value))))

(defcustom agentls-multiplexer-command '("rass")
  "The LSP multiplexer `agentls-beside' runs: a program and its arguments.
The default is rassumfrassum's `rass' (`pipx install rassumfrassum'), which
takes the servers after it, each after a `--'."
  :type '(repeat string))

(defun agentls-beside (modes &rest server)
  "Serve MODES with SERVER, your own language server, and agentls together.
MODES is a major mode or a list of them; SERVER is the program that serves them
and its arguments, as in `eglot-server-programs'.  Eglot gives a buffer one
server, so both are joined into one through `agentls-multiplexer-command': the
buffer gets your server's completion, navigation and diagnostics, and agentls's
reviews, commands and region, in one connection.  For example:

  (agentls-beside \='python-mode \"pylsp\")
  (agentls-beside \='(rust-mode rust-ts-mode) \"rust-analyzer\")"
  ;; Its chats join the same connection: one agentls for the project, which sees both the
  ;; chats and the files their agents change.
  (let* ((modes (append (if (listp modes) modes (list modes)) '(agentls-chat-mode)))
         (contact (lambda (&rest _)
                    (cons 'agentls-server
                          (append agentls-multiplexer-command
                                  (cons "--" server)
                                  (cons "--" agentls-server-command))))))
    (setq eglot-server-programs
          (cons (cons modes contact)
                (cl-remove-if (lambda (entry)
                                (let ((key (car-safe entry)))
                                  (and (not (eq (cdr-safe entry) #'agentls--contact))
                                       (cl-intersection (if (listp key) key (list key))
                                                        modes))))
                              eglot-server-programs)))
    contact))

(defcustom agentls-selection-delay 0.1
  "Seconds the region must rest before agentls is told about it."
  :type 'number)

(defcustom agentls-prompt-shows-chat t
  "Whether `agentls-prompt' shows the chat the reply goes to (not selected)."
  :type 'boolean)

(defcustom agentls-mode-line t
  "Whether the mode line shows the agent, its state and the pending changes."
  :type 'boolean)

(defcustom agentls-status-interval 1.0
  "Seconds between two looks at the agents' state while one of them works."
  :type 'number)

;;;; The server

(defclass agentls-server (eglot-lsp-server)
  ((status
    :initform nil :accessor agentls--status
    :documentation "The last `agentls.status' result.")
   (working
    :initform nil :accessor agentls--working
    :documentation "Agents whose output arrived since the last status.")
   (reviews
    :initform nil :accessor agentls--reviews
    :documentation "Alist: a file's uri (or path) to its reviews.")
   (refresh
    :initform nil :accessor agentls--refresh
    :documentation "The timer of the next status refresh, or t while one runs."))
  :documentation "An agentls server, managed by eglot.")

(defun agentls--replies-need-pacing-p ()
  "Non-nil when this Emacs's jsonrpc may leave what follows a reply unparsed.
jsonrpc before 1.0.24 stops parsing a read at the reply it waits for."
  (require 'package)
  (not (package-installed-p 'jsonrpc '(1 0 24))))

(defconst agentls--plugin-events ["turnChanged" "reviewChanged"]
  "The `agentls/*' notifications this package handles: agentls sends no others.")

(defun agentls--server-options ()
  "What this package asks of agentls at initialize, as a plist."
  (append (list :pluginEvents agentls--plugin-events)
          (when (agentls--replies-need-pacing-p) (list :paceReplies t))))

(cl-defmethod eglot-initialization-options ((_server agentls-server))
  "Ask agentls for the notifications this package handles, and to pace its
replies when this Emacs's jsonrpc needs it.  The user's own options win."
  (let ((options (cl-call-next-method))
        (ours (agentls--server-options)))
    (cond ((hash-table-p options)
           (let ((copy (copy-hash-table options)))
             (cl-loop for (key value) on ours by #'cddr
                      for name = (substring (symbol-name key) 1)
                      unless (gethash name copy) do (puthash name value copy))
             copy))
          ((listp options)
           (append options
                   (cl-loop for (key value) on ours by #'cddr
                            unless (plist-member options key) append (list key value))))
          (t options))))

(defvar agentls--last-server nil
  "The agentls server last heard from: the mode line of other buffers shows it.")

(defun agentls--server-p (server)
  "Non-nil when SERVER is a live agentls."
  (and server
       (or (cl-typep server 'agentls-server)
           (equal (plist-get (eglot--server-info server) :name) "agentls"))
       (jsonrpc-running-p server)))

(defun agentls--project ()
  "The project eglot would give the current buffer."
  (eglot--current-project))

(defun agentls--find-server (&optional project)
  "The live agentls of the current buffer, else of PROJECT (or the buffer's)."
  (let ((own (and (bound-and-true-p eglot--managed-mode) (eglot-current-server))))
    (if (agentls--server-p own)
        own
      (cl-find-if #'agentls--server-p
                  (gethash (or project (agentls--project)) eglot--servers-by-project)))))

(defun agentls--language-id (mode)
  "The LSP language id of MODE."
  (or (get mode 'eglot-language-id)
      (replace-regexp-in-string "\\(?:-ts\\)?-mode\\'" "" (symbol-name mode))))

(defun agentls--start (project)
  "Start agentls for PROJECT and return it once it is connected."
  ;; eglot 1.9 gives every buffer of a server the language id of its first mode.
  (let* ((modes (append agentls-major-modes '(agentls-chat-mode)))
         (ids (mapcar #'agentls--language-id modes))
         (root (project-root project)))
    (with-temp-buffer
      ;; A buffer no server manages: `eglot' (1.9) shuts the current buffer's
      ;; server down before it connects a new one.
      (setq default-directory (file-name-as-directory root))
      ;; eglot 1.10+ takes a language id per mode; 1.9 one for the server.
      (eglot modes project 'agentls-server agentls-server-command
             (if (fboundp 'eglot--languages) ids (car ids))))
    (let ((deadline (+ (float-time) 15)) server)
      (while (and (not (setq server (agentls--find-server project)))
                  (< (float-time) deadline))
        (accept-process-output nil 0.05))
      (or server (user-error "agentls did not start (see *EGLOT ... events*)")))))

(defun agentls--server ()
  "The agentls to talk to from the current buffer, started if need be."
  (let ((server (or (agentls--find-server)
                    (progn
                      (when (and (derived-mode-p 'agentls-chat-mode)
                                 (not (agentls--chat-workspace default-directory)))
                        ;; Its folder would become the workspace of a second agentls.
                        (user-error "Which project this chat is of is unknown: \
run the command from a file of that project"))
                      (agentls--start (agentls--project))))))
    (setq agentls--last-server server)))

(defun agentls--flush (server)
  "Send SERVER the current buffer's pending changes, if it manages it."
  (when (and (bound-and-true-p eglot--managed-mode)
             (eq (eglot-current-server) server))
    (eglot--signal-textDocument/didChange)))

(defun agentls--command (server command &optional argument callback)
  "Run agentls COMMAND on SERVER with ARGUMENT (a plist, or nil for none).
With CALLBACK, return at once and call it with the result; else wait and
return it.  Errors are agentls's to tell: it shows them, so they are only
logged here."
  (agentls--flush server)
  (let ((params (list :command command
                      :arguments (if argument (vector argument) []))))
    (if callback
        (jsonrpc-async-request
         server :workspace/executeCommand params
         :success-fn callback
         :error-fn (lambda (err) (agentls--log "%s: %s" command (plist-get err :message)))
         :timeout-fn (lambda () (agentls--log "%s: no answer" command)))
      (condition-case err
          (jsonrpc-request server :workspace/executeCommand params)
        (jsonrpc-error
         (agentls--log "%s: %s" command (alist-get 'jsonrpc-error-message (cdr err)))
         nil)))))

(defun agentls--log (format-string &rest args)
  "Log FORMAT-STRING with ARGS in *Messages* without showing it."
  (let ((inhibit-message t))
    (apply #'message (concat "[agentls] " format-string) args)))

;;;; No y/n for agentls's own edits

;; What agentls applies is what you accepted, or a chat's reply: eglot's
;; question before a server's edit is left to other servers.
(cl-defmethod eglot-handle-request :around
  ((server agentls-server) (_method (eql workspace/applyEdit)) &rest _)
  "Apply agentls's edit without asking (eglot 1.9 and 1.12+)."
  (defvar eglot-confirm-server-edits)
  (defvar eglot-confirm-server-initiated-edits)
  (with-suppressed-warnings ((obsolete eglot-confirm-server-initiated-edits))
    (let ((eglot-confirm-server-edits nil)
          (eglot-confirm-server-initiated-edits nil)
          ;; Replies stream in up to ten edits a second: no "Edit successful!".
          (inhibit-message t)
          (following (agentls--chat-windows-at-end)))
      (prog1 (cl-call-next-method)
        ;; agentls hears at once which version the edit made: eglot would tell it
        ;; only once Emacs is idle, and an edit can count as several changes, so
        ;; the next part of a reply would be refused for its version until then.
        (dolist (buffer (eglot--managed-buffers server))
          (when (buffer-live-p buffer)
            (with-current-buffer buffer (eglot--signal-textDocument/didChange))))
        ;; A chat shown at its end follows the reply.
        (dolist (window following)
          (when (window-live-p window)
            (set-window-point window (with-current-buffer (window-buffer window)
                                       (point-max)))))))))

(defun agentls--chat-windows-at-end ()
  "The windows showing a chat document at its end."
  (cl-loop for window in (window-list-1 nil 'nomini t)
           for buffer = (window-buffer window)
           when (and (eq (buffer-local-value 'major-mode buffer) 'agentls-chat-mode)
                     (>= (window-point window) (with-current-buffer buffer (point-max))))
           collect window))

;;;; Chat documents

;;;###autoload
(define-derived-mode agentls-chat-mode text-mode "Agent-Chat"
  "Major mode for agentls chat documents.
Write under the last \"## You\" heading and send it with \\[agentls-send];
\\[agentls-cancel] stops the agent's turn.  The chat is served by the agentls of
the project it was opened from.

\\{agentls-chat-mode-map}"
  (setq-local font-lock-defaults '(agentls-chat--font-lock))
  ;; The conversation is saved when Emacs quits, without a question, in the
  ;; encoding agentls writes (an ASCII-only chat would ask which one to use).
  (setq-local buffer-save-without-query t)
  (setq buffer-file-coding-system 'utf-8-unix)
  (when (and (not (agentls--find-server)) (agentls--chat-workspace default-directory))
    ;; A chat opened again (after a restart): start its workspace's agentls.
    (eglot-ensure)))

(put 'agentls-chat-mode 'eglot-language-id "markdown")

(defvar agentls-chat--font-lock
  '(("^# Chat with .*$" . 'font-lock-keyword-face)
    ("^## You$" . 'font-lock-function-name-face)
    ("^## .*$" . 'font-lock-type-face)
    ("^> .*$" . 'font-lock-comment-face)
    ("`[^`\n]+`" . 'font-lock-constant-face))
  "Highlighting of chat documents: headings, quotes and code.")

(define-key agentls-chat-mode-map (kbd "C-c C-c") #'agentls-send)
(define-key agentls-chat-mode-map (kbd "C-c C-k") #'agentls-cancel)

;; A chat document starts with "# Chat with <agent>" and agentls's note on how
;; to use it: that is a chat, wherever `chat.directory' put it.
;;;###autoload (add-to-list 'magic-mode-alist '("# Chat with .*\n\nWrite under the last `## You` heading" . agentls-chat-mode))
(add-to-list 'magic-mode-alist
             '("# Chat with .*\n\nWrite under the last `## You` heading" . agentls-chat-mode))

(defvar agentls--chat-projects (make-hash-table :test #'equal)
  "Chat folders (with a trailing slash) to the project whose agentls made them.")

(defun agentls--learn-chat (path server)
  "Remember that the chat at PATH belongs to SERVER's project."
  (when (stringp path)
    (puthash (file-name-directory (expand-file-name path))
             (eglot--project server) agentls--chat-projects)))

(defun agentls--chat-workspace (dir)
  "The project, or workspace folder, whose chats are in DIR, or nil.
Known from chats opened in this session, else from the `.workspace' file
agentls writes in each chat folder."
  (let ((dir (file-name-as-directory (expand-file-name dir))))
    (or (gethash dir agentls--chat-projects)
        (and (string-match-p "-[0-9a-f]\\{8\\}/\\'" dir)
             (let ((record (expand-file-name ".workspace" dir)))
               (and (file-readable-p record)
                    (with-temp-buffer
                      (insert-file-contents record)
                      (let ((folder (string-trim (buffer-string))))
                        (and (file-directory-p folder) folder)))))))))

(defun agentls--chat-project (dir)
  "For `project-find-functions': DIR's project when DIR holds chat documents.
That is the project whose agentls made them, so a chat attaches to it
rather than starting a second agentls with the chat folder as workspace."
  (let ((known (agentls--chat-workspace dir)))
    (cond
     ((consp known) known)
     ((stringp known)
      (let ((root (file-name-as-directory known)))
        (or (cl-loop for project being the hash-keys of eglot--servers-by-project
                     when (equal (file-name-as-directory
                                  (expand-file-name (project-root project)))
                                 root)
                     return project)
            (let ((project-find-functions
                   (remq #'agentls--chat-project project-find-functions)))
              (project-current nil root))
            (cons 'transient root)))))))

(add-hook 'project-find-functions #'agentls--chat-project -50)

(defun agentls--show-chat (path &optional no-select)
  "Show the chat document at PATH; with NO-SELECT, leave the selected window."
  (let ((buffer (find-file-noselect path)))
    (cond (no-select
           (let ((window (display-buffer buffer)))
             ;; At the end, where the reply comes (and is followed).
             (when window
               (set-window-point window (with-current-buffer buffer (point-max))))))
          ((get-buffer-window buffer) (select-window (get-buffer-window buffer)))
          (t (pop-to-buffer-same-window buffer)))
    buffer))

(defun agentls--read-agent (server prompt)
  "Read an agent's name of SERVER with PROMPT."
  (let ((status (agentls--command server "agentls.status")))
    (completing-read prompt
                     (mapcar (lambda (a) (plist-get a :name)) (plist-get status :agents))
                     nil t)))

;;;###autoload
(defun agentls-chat (&optional agent new)
  "Open AGENT's latest chat of this project, or a new one (the default agent).
With a prefix arg, ask for the agent.  With NEW, always a new chat (see
`agentls-new-chat').  Write under the last \"## You\" heading, then
\\[agentls-send]."
  (interactive
   (list (and current-prefix-arg
              (agentls--read-agent (agentls--server) "Chat with agent: "))))
  (let* ((server (agentls--server))
         (args (append (and agent (list :agent agent)) (and new (list :new t))))
         (result (agentls--command server "agentls.openChat" args))
         (path (plist-get result :path)))
    (when path
      (agentls--learn-chat path server)
      (with-current-buffer (agentls--show-chat path)
        (goto-char (point-max))
        (current-buffer)))))

;;;###autoload
(defun agentls-new-chat (&optional agent)
  "Open a new chat with AGENT (the default agent; with a prefix arg, ask)."
  (interactive
   (list (and current-prefix-arg
              (agentls--read-agent (agentls--server) "Chat with agent: "))))
  (agentls-chat agent t))

;;;###autoload
(defun agentls-chats ()
  "Pick one of this project's chats, by its first message, and open it.
agentls lists them (its workspace symbols), most recently active first."
  (interactive)
  (let* ((server (agentls--server))
         (choices (agentls--chat-choices
                   (jsonrpc-request server :workspace/symbol '(:query "")))))
    (if (null choices)
        (message "agentls: no chats in this project yet (%s starts one)"
                 (substitute-command-keys "\\[agentls-chat]"))
      (let ((path (cdr (assoc (completing-read "Chat: " choices nil t) choices))))
        (agentls--learn-chat path server)
        (with-current-buffer (agentls--show-chat path)
          (goto-char (point-max))
          (current-buffer))))))

(defun agentls--chat-choices (symbols)
  "SYMBOLS, agentls's list of chats, as (LABEL . PATH) in their order.
Each label is the chat's first message and its agent; the same label
twice gets a number."
  (let ((to-path (if (fboundp 'eglot-uri-to-path) 'eglot-uri-to-path 'eglot--uri-to-path))
        choices)
    (cl-loop
     for symbol across symbols do
     (let* ((label (format "%s (%s)" (plist-get symbol :name)
                           (plist-get symbol :containerName)))
            (unique label)
            (n 1))
       (while (assoc unique choices)
         (setq n (1+ n) unique (format "%s <%d>" label n)))
       (push (cons unique (funcall to-path (plist-get (plist-get symbol :location) :uri)))
             choices)))
    (nreverse choices)))

;;;###autoload
(defun agentls-send ()
  "Send what is under the last \"## You\" heading of this chat to its agent."
  (interactive)
  (let ((server (agentls--server)))
    (agentls--command server "agentls.send"
                      (and (derived-mode-p 'agentls-chat-mode)
                           (list :uri (plist-get (eglot--TextDocumentIdentifier) :uri))))
    (agentls--working-soon server nil)))

(defun agentls--region-context ()
  "The region as agentls context (:uri and :range), or nil without one."
  (when (and (use-region-p) buffer-file-name)
    (let ((beg (region-beginning)) (end (region-end))
          (uri (plist-get (eglot--TextDocumentIdentifier) :uri)))
      (if (agentls--server-p (and (bound-and-true-p eglot--managed-mode)
                                  (eglot-current-server)))
          (list :uri uri
                :range (list :start (eglot--pos-to-lsp-position beg)
                             :end (eglot--pos-to-lsp-position end)))
        ;; A buffer agentls does not see: whole lines mean the same in every
        ;; position encoding.
        (list :uri uri
              :range (list :start (list :line (1- (line-number-at-pos beg)) :character 0)
                           :end (save-excursion
                                  (goto-char end)
                                  (list :line (if (bolp) (1- (line-number-at-pos end))
                                                (line-number-at-pos end))
                                        :character 0))))))))

;;;###autoload
(defun agentls-prompt (text &optional agent context)
  "Ask the agent TEXT; the active region (CONTEXT) goes along.
The reply streams into the agent's latest chat, shown when
`agentls-prompt-shows-chat' says so.  With a prefix arg, ask which AGENT."
  (interactive
   (let ((context (agentls--region-context)))
     (list (read-string (if context "Ask the agent about the region: " "Ask the agent: "))
           (and current-prefix-arg (agentls--read-agent (agentls--server) "Agent: "))
           context)))
  (when (string-empty-p (string-trim text)) (user-error "Nothing to ask"))
  (let ((server (agentls--server)))
    (agentls--command
     server "agentls.prompt"
     (append (list :text text) (and agent (list :agent agent)) context)
     (lambda (result)
       (let ((chat (plist-get result :chat)))
         (agentls--learn-chat chat server)
         (when (and chat agentls-prompt-shows-chat)
           (run-with-timer 0 nil #'agentls--show-chat chat t)))))
    (agentls--working-soon server agent)))

;;;###autoload
(defun agentls-cancel (&optional agent)
  "Stop the running turn of AGENT (the default agent; prefix arg: ask)."
  (interactive
   (list (and current-prefix-arg (agentls--read-agent (agentls--server) "Stop agent: "))))
  (let ((server (agentls--server)))
    (agentls--command server "agentls.cancel" (and agent (list :agent agent)))
    (agentls--refresh-status server)))

(defun agentls--agent (status &optional name)
  "The agent NAME (or the default one) in STATUS, a plist."
  (cl-find-if (lambda (a) (if name (equal (plist-get a :name) name)
                            (eq (plist-get a :default) t)))
              (plist-get status :agents)))

(defun agentls--current-session (agent)
  "AGENT's current session, a plist, or nil."
  (cl-find-if (lambda (s) (eq (plist-get s :current) t)) (plist-get agent :sessions)))

;;;###autoload
(defun agentls-set-mode (mode &optional agent)
  "Switch AGENT's current session (the default agent's) to MODE, an id.
Interactively, pick among the modes the agent offers; a prefix arg asks
for the agent too."
  (interactive
   (let* ((server (agentls--server))
          (agent (and current-prefix-arg (agentls--read-agent server "Agent: ")))
          (status (agentls--command server "agentls.status"))
          (entry (agentls--agent status agent))
          (session (agentls--current-session entry))
          (modes (append (plist-get (plist-get session :modes) :availableModes) nil))
          (current (plist-get session :mode))
          (names (mapcar (lambda (m)
                           (cons (format "%s%s" (plist-get m :name)
                                         (if (equal (plist-get m :id) current) " (current)" ""))
                                 (plist-get m :id)))
                         modes)))
     (unless names
       (user-error "%s offers no modes (no session yet? send it a message first)"
                   (or (plist-get entry :name) "The agent")))
     (list (cdr (assoc (completing-read (format "Mode of %s: " (plist-get entry :name))
                                        names nil t)
                       names))
           agent)))
  (let ((server (agentls--server)))
    (agentls--command server "agentls.setMode"
                      (append (list :mode mode) (and agent (list :agent agent))))
    (agentls--refresh-status server)))

;;;###autoload
(defun agentls-status ()
  "Show the agents, their state and their current session's mode."
  (interactive)
  (let ((status (agentls--command (agentls--server) "agentls.status")))
    (message "%s"
             (mapconcat
              (lambda (a)
                (let ((session (agentls--current-session a)))
                  (format "%s%s: %s%s" (plist-get a :name)
                          (if (eq (plist-get a :default) t) " (default)" "")
                          (plist-get a :state)
                          (if session (format ", mode %s" (plist-get session :mode)) ""))))
              (plist-get status :agents) "\n"))))

;;;; What you select

(defvar-local agentls--selection-sent nil
  "The selection last sent from this buffer.")
(defvar agentls--selection-timer nil
  "The pending selection notification.")

(defun agentls--selection-params ()
  "The current buffer's region (or point) as `agentls/didChangeSelection' params."
  (let* ((active (use-region-p))
         (beg (if active (region-beginning) (point)))
         (end (if active (region-end) (point))))
    (append (list :textDocument (list :uri (plist-get (eglot--TextDocumentIdentifier) :uri))
                  :selection (list :start (eglot--pos-to-lsp-position beg)
                                   :end (eglot--pos-to-lsp-position end)))
            (and active (list :text (buffer-substring-no-properties beg end))))))

(defun agentls--send-selection (buffer)
  "Tell agentls what is selected in BUFFER, unless it knows already."
  (setq agentls--selection-timer nil)
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (let ((server (and eglot--managed-mode (eglot-current-server))))
        (when (agentls--server-p server)
          (let ((params (agentls--selection-params)))
            (unless (equal params agentls--selection-sent)
              (eglot--signal-textDocument/didChange)
              (jsonrpc-notify server :agentls/didChangeSelection params)
              (setq agentls--selection-sent params))))))))

(defun agentls--selection-moved ()
  "After a command: tell agentls the selection once it rests."
  (when (timerp agentls--selection-timer) (cancel-timer agentls--selection-timer))
  (setq agentls--selection-timer
        (run-with-timer agentls-selection-delay nil
                        #'agentls--send-selection (current-buffer))))

(defun agentls--managed ()
  "In a buffer eglot starts or stops managing: follow its selection for agentls."
  (if (and eglot--managed-mode (agentls--server-p (eglot-current-server)))
      (add-hook 'post-command-hook #'agentls--selection-moved nil t)
    (remove-hook 'post-command-hook #'agentls--selection-moved t)))

(add-hook 'eglot-managed-mode-hook #'agentls--managed)

;;;; The mode line

(defun agentls--pending (server)
  "How many changes of SERVER's reviews wait for you."
  (cl-loop for (_ . reviews) in (agentls--reviews server)
           sum (cl-loop for review across reviews
                        sum (cl-count-if (lambda (h) (member (plist-get h :state)
                                                             '("pending" "conflict")))
                                         (plist-get review :hunks)))))

(defun agentls--state-word (state)
  "What the mode line says for agent STATE (from `agentls.status')."
  (pcase state
    ("running" "ready")
    ("prompting" "working")
    ("not started" "idle")
    (_ state)))

(defun agentls--lighter ()
  "The mode line text: agent, state, pending changes."
  (let* ((own (and (bound-and-true-p eglot--managed-mode) (eglot-current-server)))
         (server (if (agentls--server-p own) own agentls--last-server)))
    (when (and agentls-mode-line (agentls--server-p server))
      (let* ((agent (agentls--agent (agentls--status server)))
             (name (or (plist-get agent :name) "agentls"))
             (state (if (member name (agentls--working server)) "working"
                      (agentls--state-word (plist-get agent :state))))
             (pending (agentls--pending server)))
        (propertize
         (format " agentls[%s%s%s]" name (if state (concat ":" state) "")
                 (if (> pending 0) (format ", %d to review" pending) ""))
         'help-echo "agentls: the default agent, its state and the changes waiting for you")))))

(defvar agentls--mode-line-entry '(:eval (agentls--lighter))
  "The lighter's entry in `mode-line-misc-info'.")
(put 'agentls--mode-line-entry 'risky-local-variable t)
;; A list, not the bare symbol: a symbol first in `mode-line-misc-info' would
;; make the whole of it a conditional on that symbol.
(add-to-list 'mode-line-misc-info '(agentls-mode-line agentls--mode-line-entry))

(defun agentls--refresh-status (server &optional later)
  "Ask SERVER for the agents' state (after LATER seconds), then redraw."
  (unless (agentls--refresh server)
    (setf (agentls--refresh server)
          (run-with-timer
           (or later 0) nil
           (lambda ()
             (setf (agentls--refresh server) t)
             (if (not (jsonrpc-running-p server))
                 (setf (agentls--refresh server) nil)
               (jsonrpc-async-request
                server :workspace/executeCommand '(:command "agentls.status" :arguments [])
                :success-fn (lambda (status) (agentls--status-arrived server status))
                :error-fn (lambda (_) (setf (agentls--refresh server) nil))
                :timeout-fn (lambda () (setf (agentls--refresh server) nil)))))))))

(defun agentls--status-arrived (server status)
  "Keep SERVER's STATUS; look again soon while an agent works."
  (setf (agentls--refresh server) nil
        (agentls--status server) status
        (agentls--working server) nil)
  (when (cl-some (lambda (a) (equal (plist-get a :state) "prompting"))
                 (plist-get status :agents))
    (agentls--refresh-status server agentls-status-interval))
  (force-mode-line-update t))

(defun agentls--working-soon (server agent)
  "AGENT (nil: the default one) of SERVER has work: say so, and look again."
  (let ((name (or agent (plist-get (agentls--agent (agentls--status server)) :name))))
    (when name (cl-pushnew name (agentls--working server) :test #'equal)))
  (force-mode-line-update t)
  (agentls--refresh-status server agentls-status-interval))

(cl-defmethod eglot-handle-notification
  ((server agentls-server) (_method (eql agentls/turnChanged))
   &key agent prompting &allow-other-keys)
  "AGENT of SERVER started working (PROMPTING is t) or stopped."
  (setq agentls--last-server server)
  (if (eq prompting t)
      (agentls--working-soon server agent)
    (agentls--refresh-status server)))

(cl-defmethod eglot-handle-notification
  ((server agentls-server) (_method (eql agentls/reviewChanged))
   &key uri path reviews &allow-other-keys)
  "SERVER's reviews changed: all of them, or those of one file (URI, PATH)."
  (setq agentls--last-server server)
  (let ((key (or uri path)))
    (setf (agentls--reviews server)
          (if key
              (cons (cons key reviews) (assoc-delete-all key (agentls--reviews server)))
            ;; Every review at once: group them by file.
            (let (by-file)
              (cl-loop for review across reviews
                       for file = (plist-get review :path)
                       do (push review (alist-get file by-file nil nil #'equal)))
              (mapcar (lambda (e) (cons (car e) (vconcat (cdr e)))) by-file)))))
  (force-mode-line-update t))

(cl-defmethod eglot-handle-notification :after
  ((server agentls-server) (_method (eql window/showMessage)) &key &allow-other-keys)
  "A message from SERVER (a turn's summary, say): look at the agents again."
  (agentls--refresh-status server))

(defun agentls--connected (server)
  "Right after eglot connects SERVER: learn its agents' state."
  (when (cl-typep server 'agentls-server)
    (setq agentls--last-server server)
    (agentls--refresh-status server)))

(add-hook 'eglot-connect-hook #'agentls--connected)

;;;; Keys

;;;###autoload
(defvar agentls-command-map
  (let ((map (make-sparse-keymap)))
    (define-key map "c" #'agentls-chat)
    (define-key map "n" #'agentls-new-chat)
    (define-key map "l" #'agentls-chats)
    (define-key map "p" #'agentls-prompt)
    (define-key map "s" #'agentls-send)
    (define-key map "k" #'agentls-cancel)
    (define-key map "m" #'agentls-set-mode)
    (define-key map "i" #'agentls-status)
    (define-key map "a" #'eglot-code-actions)
    map)
  "agentls's commands, to bind under a prefix of yours.
For example: (define-key global-map (kbd \"C-c a\") agentls-command-map)")
;;;###autoload
(fset 'agentls-command-map agentls-command-map)

(agentls--register)

;; Installed as a package, agentls is known to `M-x eglot' as soon as eglot is
;; loaded (this line goes to the autoloads only).
;;;###autoload (with-eval-after-load 'eglot (require 'agentls))

(provide 'agentls)
;;; agentls.el ends here
