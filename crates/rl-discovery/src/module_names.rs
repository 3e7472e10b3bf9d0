//! Module names a file in an environments folder must not take. Python runs an environment as a
//! script, so its folder comes first on `sys.path`: a `json.py` there is what every `import
//! json` of that run gets — atroposlib's included — and every environment of the folder breaks.

/// CPython's `sys.stdlib_module_names` of 3.11, 3.12 and 3.13, merged and sorted. Made with
/// `for v in 3.11 3.12 3.13; do python$v -c 'import sys; print(*sys.stdlib_module_names,
/// sep="\n")'; done | sort -u`.
#[rustfmt::skip]
pub const STANDARD_LIBRARY_MODULES: &[&str] = &[
    "__future__", "_abc", "_aix_support", "_android_support", "_ast", "_asyncio", "_bisect",
    "_blake2", "_bootsubprocess", "_bz2", "_codecs", "_codecs_cn", "_codecs_hk", "_codecs_iso2022",
    "_codecs_jp", "_codecs_kr", "_codecs_tw", "_collections", "_collections_abc", "_colorize",
    "_compat_pickle", "_compression", "_contextvars", "_crypt", "_csv", "_ctypes", "_curses",
    "_curses_panel", "_datetime", "_dbm", "_decimal", "_elementtree", "_frozen_importlib",
    "_frozen_importlib_external", "_functools", "_gdbm", "_hashlib", "_heapq", "_imp",
    "_interpchannels", "_interpqueues", "_interpreters", "_io", "_ios_support", "_json", "_locale",
    "_lsprof", "_lzma", "_markupbase", "_md5", "_msi", "_multibytecodec", "_multiprocessing",
    "_opcode", "_opcode_metadata", "_operator", "_osx_support", "_overlapped", "_pickle",
    "_posixshmem", "_posixsubprocess", "_py_abc", "_pydatetime", "_pydecimal", "_pyio", "_pylong",
    "_pyrepl", "_queue", "_random", "_scproxy", "_sha1", "_sha2", "_sha256", "_sha3", "_sha512",
    "_signal", "_sitebuiltins", "_socket", "_sqlite3", "_sre", "_ssl", "_stat", "_statistics",
    "_string", "_strptime", "_struct", "_suggestions", "_symtable", "_sysconfig", "_thread",
    "_threading_local", "_tkinter", "_tokenize", "_tracemalloc", "_typing", "_uuid", "_warnings",
    "_weakref", "_weakrefset", "_winapi", "_wmi", "_zoneinfo", "abc", "aifc", "antigravity",
    "argparse", "array", "ast", "asynchat", "asyncio", "asyncore", "atexit", "audioop", "base64",
    "bdb", "binascii", "bisect", "builtins", "bz2", "cProfile", "calendar", "cgi", "cgitb",
    "chunk", "cmath", "cmd", "code", "codecs", "codeop", "collections", "colorsys", "compileall",
    "concurrent", "configparser", "contextlib", "contextvars", "copy", "copyreg", "crypt", "csv",
    "ctypes", "curses", "dataclasses", "datetime", "dbm", "decimal", "difflib", "dis", "distutils",
    "doctest", "email", "encodings", "ensurepip", "enum", "errno", "faulthandler", "fcntl",
    "filecmp", "fileinput", "fnmatch", "fractions", "ftplib", "functools", "gc", "genericpath",
    "getopt", "getpass", "gettext", "glob", "graphlib", "grp", "gzip", "hashlib", "heapq", "hmac",
    "html", "http", "idlelib", "imaplib", "imghdr", "imp", "importlib", "inspect", "io",
    "ipaddress", "itertools", "json", "keyword", "lib2to3", "linecache", "locale", "logging",
    "lzma", "mailbox", "mailcap", "marshal", "math", "mimetypes", "mmap", "modulefinder", "msilib",
    "msvcrt", "multiprocessing", "netrc", "nis", "nntplib", "nt", "ntpath", "nturl2path",
    "numbers", "opcode", "operator", "optparse", "os", "ossaudiodev", "pathlib", "pdb", "pickle",
    "pickletools", "pipes", "pkgutil", "platform", "plistlib", "poplib", "posix", "posixpath",
    "pprint", "profile", "pstats", "pty", "pwd", "py_compile", "pyclbr", "pydoc", "pydoc_data",
    "pyexpat", "queue", "quopri", "random", "re", "readline", "reprlib", "resource", "rlcompleter",
    "runpy", "sched", "secrets", "select", "selectors", "shelve", "shlex", "shutil", "signal",
    "site", "smtpd", "smtplib", "sndhdr", "socket", "socketserver", "spwd", "sqlite3",
    "sre_compile", "sre_constants", "sre_parse", "ssl", "stat", "statistics", "string",
    "stringprep", "struct", "subprocess", "sunau", "symtable", "sys", "sysconfig", "syslog",
    "tabnanny", "tarfile", "telnetlib", "tempfile", "termios", "textwrap", "this", "threading",
    "time", "timeit", "tkinter", "token", "tokenize", "tomllib", "trace", "traceback",
    "tracemalloc", "tty", "turtle", "turtledemo", "types", "typing", "unicodedata", "unittest",
    "urllib", "uu", "uuid", "venv", "warnings", "wave", "weakref", "webbrowser", "winreg",
    "winsound", "wsgiref", "xdrlib", "xml", "xmlrpc", "zipapp", "zipfile", "zipimport", "zlib",
    "zoneinfo",
];

/// Top-level modules an environment's run imports besides the standard library: atroposlib and
/// its requirements, rl's own Python (`rl_engine`, `rl_trainer`), the trainer's, and the common
/// ML stack. Sorted.
#[rustfmt::skip]
pub const RUNTIME_DEPENDENCIES: &[&str] = &[
    "accelerate", "aiofiles", "aiohttp", "anyio", "atroposlib", "click", "datasets", "fastapi",
    "flax", "gradio", "gymnasium", "hf_transfer", "httpx", "huggingface_hub", "jax", "jinja2",
    "jsonlines", "latex2sympy2_extended", "markdown", "math_verify", "nltk", "numpy", "openai",
    "optax", "packaging", "pandas", "peft", "polars", "pyarrow", "pydantic", "pydantic_cli",
    "pydantic_core", "regex", "requests", "rich", "rl_engine", "rl_trainer", "safetensors",
    "scipy", "sentencepiece", "sklearn", "starlette", "sympy", "tenacity", "tiktoken", "tinker",
    "tinker_atropos", "tokenizers", "torch", "tqdm", "transformers", "trl", "typing_extensions",
    "uvicorn", "vllm", "wandb", "yaml",
];

/// What a file named like a module takes the place of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shadowed {
    StandardLibrary,
    Dependency,
}

impl std::fmt::Display for Shadowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Shadowed::StandardLibrary => "Python's standard library module",
            Shadowed::Dependency => "the module environments import at run time",
        })
    }
}

/// Whether a top-level module named `name` would hide one that runs need.
pub fn shadowed_module(name: &str) -> Option<Shadowed> {
    if STANDARD_LIBRARY_MODULES.binary_search(&name).is_ok() {
        Some(Shadowed::StandardLibrary)
    } else if RUNTIME_DEPENDENCIES.binary_search(&name).is_ok() {
        Some(Shadowed::Dependency)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_for_binary_search() {
        for list in [STANDARD_LIBRARY_MODULES, RUNTIME_DEPENDENCIES] {
            assert!(list.windows(2).all(|pair| pair[0] < pair[1]));
        }
    }

    #[test]
    fn the_names_that_broke_folders_are_known() {
        for name in [
            "json", "typing", "random", "asyncio", "logging", "token", "math", "enum",
        ] {
            assert_eq!(
                shadowed_module(name),
                Some(Shadowed::StandardLibrary),
                "{name}"
            );
        }
        for name in [
            "atroposlib",
            "openai",
            "pydantic",
            "datasets",
            "transformers",
            "torch",
        ] {
            assert_eq!(shadowed_module(name), Some(Shadowed::Dependency), "{name}");
        }
        for name in ["gsm8k", "word_count", "countdown", "utils"] {
            assert_eq!(shadowed_module(name), None, "{name}");
        }
    }
}
