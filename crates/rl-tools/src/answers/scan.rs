//! What a scan of the environments folder reports beside the environments, in
//! `rl_list_environments`: names shared by several environments, files skipped and files that
//! endanger the rest, each key named here from rl-discovery's typed records.

use rl_discovery::{
    DuplicateName, FileWarning, Nesting, Shadowed, SkipReason, SkippedFile, Warning,
};
use serde::Serialize;

/// A name several environments share: select those by key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DuplicateNameView {
    pub name: String,
    pub keys: Vec<String>,
}

impl From<&DuplicateName> for DuplicateNameView {
    fn from(duplicate: &DuplicateName) -> Self {
        Self {
            name: duplicate.name.clone(),
            keys: duplicate.keys.clone(),
        }
    }
}

/// A Python file that could not be read, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedFileView {
    pub file: String,
    pub reason: SkipReasonView,
    /// For people: the reason in words.
    #[serde(skip)]
    pub reason_text: String,
}

impl From<&SkippedFile> for SkippedFileView {
    fn from(skipped: &SkippedFile) -> Self {
        Self {
            file: skipped.file.clone(),
            reason: SkipReasonView::from(&skipped.reason),
            reason_text: skipped.reason.to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SkipReasonView {
    SyntaxError {
        line: u32,
        column: u32,
        message: String,
    },
    Undecodable {
        encoding: String,
        detail: String,
    },
    UnknownEncoding {
        label: String,
    },
    TooDeeplyNested {
        /// `brackets`, `indentation` or `expression`.
        nesting: &'static str,
        line: u32,
        limit: u32,
    },
    Binary,
    NameNotUtf8,
    NotAFile {
        file_type: String,
    },
    TooLarge {
        bytes: u64,
        limit: u64,
    },
    SymlinkLoop {
        ancestor: String,
    },
    Unreadable {
        message: String,
    },
}

impl From<&SkipReason> for SkipReasonView {
    fn from(reason: &SkipReason) -> Self {
        match reason.clone() {
            SkipReason::SyntaxError {
                line,
                column,
                message,
            } => Self::SyntaxError {
                line,
                column,
                message,
            },
            SkipReason::Undecodable { encoding, detail } => Self::Undecodable { encoding, detail },
            SkipReason::UnknownEncoding { label } => Self::UnknownEncoding { label },
            SkipReason::TooDeeplyNested {
                nesting,
                line,
                limit,
            } => Self::TooDeeplyNested {
                nesting: match nesting {
                    Nesting::Brackets => "brackets",
                    Nesting::Indentation => "indentation",
                    Nesting::Expression => "expression",
                },
                line,
                limit,
            },
            SkipReason::Binary => Self::Binary,
            SkipReason::NameNotUtf8 => Self::NameNotUtf8,
            SkipReason::NotAFile { file_type } => Self::NotAFile { file_type },
            SkipReason::TooLarge { bytes, limit } => Self::TooLarge { bytes, limit },
            SkipReason::SymlinkLoop { ancestor } => Self::SymlinkLoop { ancestor },
            SkipReason::Unreadable { message } => Self::Unreadable { message },
        }
    }
}

/// A file that breaks the environments beside it (a `json.py` shadowing the standard library),
/// or holds classes too deep to follow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileWarningView {
    pub file: String,
    pub warning: WarningView,
    /// For people: the warning in words.
    #[serde(skip)]
    pub warning_text: String,
}

impl From<&FileWarning> for FileWarningView {
    fn from(warning: &FileWarning) -> Self {
        Self {
            file: warning.file.clone(),
            warning: WarningView::from(&warning.warning),
            warning_text: warning.warning.to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WarningView {
    ShadowsModule {
        module: String,
        /// `standard_library` or `dependency`.
        shadowed: &'static str,
    },
    InheritanceTooDeep {
        class: String,
        limit: usize,
    },
}

impl From<&Warning> for WarningView {
    fn from(warning: &Warning) -> Self {
        match warning.clone() {
            Warning::ShadowsModule { module, shadowed } => Self::ShadowsModule {
                module,
                shadowed: match shadowed {
                    Shadowed::StandardLibrary => "standard_library",
                    Shadowed::Dependency => "dependency",
                },
            },
            Warning::InheritanceTooDeep { class, limit } => {
                Self::InheritanceTooDeep { class, limit }
            }
        }
    }
}
