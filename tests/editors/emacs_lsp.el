;;; emacs_lsp.el --- drive the server a docs/editors.md snippet started -*- lexical-binding: t -*-

;; Loaded after the snippet (the user's init): opens the note as `C-x C-f' would, lets the
;; command loop's hooks and idle timers run (where `eglot-ensure' and `lsp-deferred' start their
;; server), waits
;; for the index, then asks what `C-M-.' (xref-find-apropos) and eldoc ask, and writes the
;; answers as JSON.  Env: MDSEARCH_CLIENT (eglot or lsp-mode), MDSEARCH_VAULT, MDSEARCH_NOTE,
;; MDSEARCH_QUERY, MDSEARCH_LINE (0-based), MDSEARCH_OUT.

(require 'json)
(require 'xref)

(defvar mdsearch-test-result (list (cons 'emacs emacs-version)))

(defun mdsearch-test-put (key value)
  (push (cons key value) mdsearch-test-result))

(defun mdsearch-test-finish (code)
  (with-temp-file (getenv "MDSEARCH_OUT")
    (insert (json-encode mdsearch-test-result)))
  (kill-emacs code))

(defun mdsearch-test-wait (what predicate seconds)
  "Let Emacs run (process output, timers) until PREDICATE holds, for at most SECONDS."
  (let ((deadline (+ (float-time) seconds)) value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.2))
    (or value (error "%s: not within %ss" what seconds))))

(defvar mdsearch-test-eglot (equal (getenv "MDSEARCH_CLIENT") "eglot"))

(defun mdsearch-test-request (method params)
  (if mdsearch-test-eglot
      (jsonrpc-request (eglot-current-server) (intern (concat ":" method)) params)
    (lsp-request method params)))

(defun mdsearch-test-server-p ()
  (if mdsearch-test-eglot
      (eglot-current-server)
    (seq-find (lambda (ws) (and (eq (lsp--client-server-id (lsp--workspace-client ws)) 'mdsearch)
                                (eq (lsp--workspace-status ws) 'initialized)))
              (lsp-workspaces))))

(defun mdsearch-test-state ()
  (let ((status (mdsearch-test-request "workspace/executeCommand"
                                       '(:command "mdsearch.status" :arguments []))))
    (if (hash-table-p status) (gethash "state" status) (plist-get status :state))))

(condition-case err
    (let ((vault (file-name-as-directory (getenv "MDSEARCH_VAULT"))))
      (unless mdsearch-test-eglot
        ;; the answer a user gives lsp-mode's first question (which folder is the project)
        (require 'lsp-mode)
        (lsp-workspace-folders-add vault))
      (find-file (expand-file-name (getenv "MDSEARCH_NOTE") vault))
      (mdsearch-test-put 'mode (symbol-name major-mode))
      ;; the command loop after `C-x C-f': its post-command hook, then idle (batch Emacs never
      ;; goes idle, so the idle timers lsp-deferred set are run here)
      (run-hooks 'post-command-hook)
      (dolist (timer (copy-sequence timer-idle-list))
        (timer-event-handler timer))
      (mdsearch-test-wait "a server for the note" #'mdsearch-test-server-p 60)
      (mdsearch-test-put 'root (if mdsearch-test-eglot
                                   (project-root (eglot--project (eglot-current-server)))
                                 (lsp-workspace-root)))
      (mdsearch-test-wait "the index ready"
                          (lambda () (equal (mdsearch-test-state) "ready")) 150)
      ;; C-M-. : the xref backend of the buffer, asked for the query
      (let* ((backend (xref-find-backend))
             (items (xref-backend-apropos backend (getenv "MDSEARCH_QUERY"))))
        (mdsearch-test-put 'backend (symbol-name backend))
        (mdsearch-test-put 'symbols
                           (vconcat (mapcar (lambda (item)
                                              (list (cons 'name (xref-item-summary item))
                                                    (cons 'file (xref-location-group
                                                                 (xref-item-location item)))))
                                            items))))
      ;; what eldoc and lsp-describe-thing-at-point send for the line
      (goto-char (point-min))
      (forward-line (string-to-number (getenv "MDSEARCH_LINE")))
      (let ((hover (mdsearch-test-request
                    "textDocument/hover"
                    (if mdsearch-test-eglot (eglot--TextDocumentPositionParams)
                      (lsp--text-document-position-params)))))
        (mdsearch-test-put 'hover (if (hash-table-p hover)
                                      (gethash "value" (gethash "contents" hover))
                                    (plist-get (plist-get hover :contents) :value))))
      (mdsearch-test-finish 0))
  (error (mdsearch-test-put 'error (error-message-string err))
         (mdsearch-test-finish 1)))
