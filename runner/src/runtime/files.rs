//! The directories granted with `--dir`, as a run sees them.
//!
//! A granted directory is read once into a [`Snapshot`]: names and contents,
//! symbolic links followed as the replay digest follows them. Every run
//! starts from the snapshot and writes into its own copy ([`Fs`], copied on
//! its first change), so the runs of a campaign, in parallel or one after
//! another, never see each other's files, and a replay sees the files its
//! run saw. Nothing else of the host file system reaches a run: a directory
//! lists by name, inode numbers count from the root, and times are logical
//! (the snapshot's files date from the virtual clock's epoch and each change
//! advances a counter by a nanosecond).

use crate::model::Clock;
use anyhow::{bail, Context, Result};
use std::any::Any;
use std::collections::BTreeMap;
use std::io::{IoSlice, IoSliceMut, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};
use wasi_common::dir::{OpenResult, ReaddirCursor, ReaddirEntity, WasiDir};
use wasi_common::file::{Advice, FdFlags, FileType, Filestat, OFlags, WasiFile};
use wasi_common::snapshots::preview_1::types::Errno;
use wasi_common::{Error, ErrorExt, SystemTimeSpec};

/// The most a granted directory may hold: the snapshot is kept in memory.
pub const MAX_SNAPSHOT_BYTES: u64 = 1 << 30;

/// Symbolic links followed in one path before `ELOOP` (Linux's limit).
const MAX_LINKS: u32 = 40;

/// An inode: an index into [`Tree::nodes`]; the root is 0.
type Ino = usize;

#[derive(Clone, Copy, Debug, Default)]
struct Times {
    atim: u64,
    mtim: u64,
}

impl Times {
    fn at(ns: u64) -> Times {
        Times { atim: ns, mtim: ns }
    }
}

#[derive(Clone, Debug)]
enum Kind {
    File(Arc<Vec<u8>>),
    Dir {
        entries: BTreeMap<String, Ino>,
        parent: Ino,
    },
    Symlink(String),
}

#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    times: Times,
    /// Directory entries naming it.
    links: u64,
}

/// A directory tree in memory. Nodes are never freed: an unlinked file
/// stays readable through the descriptors that hold it.
#[derive(Clone, Debug)]
struct Tree {
    nodes: Vec<Node>,
    /// The logical time of the last change.
    tick: u64,
}

impl Tree {
    fn node(&self, ino: Ino) -> &Node {
        &self.nodes[ino]
    }

    fn is_dir(&self, ino: Ino) -> bool {
        matches!(self.nodes[ino].kind, Kind::Dir { .. })
    }

    fn entries(&self, ino: Ino) -> Result<&BTreeMap<String, Ino>, Error> {
        match &self.nodes[ino].kind {
            Kind::Dir { entries, .. } => Ok(entries),
            _ => Err(Error::not_dir()),
        }
    }

    fn entries_mut(&mut self, ino: Ino) -> &mut BTreeMap<String, Ino> {
        match &mut self.nodes[ino].kind {
            Kind::Dir { entries, .. } => entries,
            _ => unreachable!("a parent is a directory"),
        }
    }

    fn now(&mut self) -> u64 {
        self.tick += 1;
        Clock::EPOCH_NS + self.tick
    }

    fn add(&mut self, kind: Kind) -> Ino {
        let t = self.now();
        self.nodes.push(Node {
            kind,
            times: Times::at(t),
            links: 0,
        });
        self.nodes.len() - 1
    }

    fn link(&mut self, dir: Ino, name: &str, ino: Ino) {
        self.nodes[ino].links += 1;
        self.entries_mut(dir).insert(name.to_string(), ino);
        let t = self.now();
        self.nodes[dir].times.mtim = t;
    }

    fn unlink(&mut self, dir: Ino, name: &str) {
        if let Some(ino) = self.entries_mut(dir).remove(name) {
            self.nodes[ino].links -= 1;
        }
        let t = self.now();
        self.nodes[dir].times.mtim = t;
    }

    /// Whether `ino` is `dir` or below it.
    fn within(&self, mut ino: Ino, dir: Ino) -> bool {
        loop {
            if ino == dir {
                return true;
            }
            match self.nodes[ino].kind {
                Kind::Dir { parent, .. } if parent != ino => ino = parent,
                _ => return false,
            }
        }
    }

    fn stat(&self, ino: Ino) -> Filestat {
        let n = self.node(ino);
        let (filetype, size) = match &n.kind {
            Kind::File(d) => (FileType::RegularFile, d.len() as u64),
            Kind::Dir { .. } => (FileType::Directory, 4096),
            Kind::Symlink(t) => (FileType::SymbolicLink, t.len() as u64),
        };
        let time = |ns: u64| Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(ns));
        Filestat {
            device_id: 1,
            inode: ino as u64 + 1,
            filetype,
            nlink: n.links.max(1),
            size,
            atim: time(n.times.atim),
            mtim: time(n.times.mtim),
            ctim: time(n.times.mtim),
        }
    }

    /// Resolves `path` from the directory `base`, which the path may not
    /// leave. Symbolic links are followed on the way, and at the end when
    /// `follow` (or the path ends in `/`).
    fn resolve(&self, base: Ino, path: &str, follow: bool) -> Result<Lookup, Error> {
        if path.is_empty() {
            return Err(Error::not_found());
        }
        if path.starts_with('/') {
            return Err(Errno::Notcapable.into());
        }
        let must_dir = path.ends_with('/');
        let follow = follow || must_dir;
        let mut rest: Vec<String> = split(path);
        rest.reverse();
        let mut stack = vec![base];
        let mut links = 0;
        let mut found: Option<(Ino, String)> = None;
        while let Some(c) = rest.pop() {
            let last = rest.is_empty();
            let dir = *stack.last().expect("the base stays");
            if c == ".." {
                if stack.len() == 1 {
                    return Err(Errno::Notcapable.into());
                }
                stack.pop();
                found = None;
                continue;
            }
            let entries = self.entries(dir)?;
            let Some(&ino) = entries.get(&c) else {
                if last {
                    return Ok(Lookup {
                        parent: dir,
                        name: Some(c),
                        ino: None,
                        must_dir,
                    });
                }
                return Err(Error::not_found());
            };
            if let Kind::Symlink(target) = &self.node(ino).kind {
                if !last || follow {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(Errno::Loop.into());
                    }
                    if target.starts_with('/') {
                        return Err(Errno::Notcapable.into());
                    }
                    let mut t = split(target);
                    t.reverse();
                    rest.extend(t);
                    found = None;
                    continue;
                }
            }
            if last {
                found = Some((dir, c));
                stack.push(ino);
            } else {
                if !self.is_dir(ino) {
                    return Err(Error::not_dir());
                }
                stack.push(ino);
            }
        }
        let ino = *stack.last().expect("the base stays");
        if must_dir && !self.is_dir(ino) {
            return Err(Error::not_dir());
        }
        Ok(match found {
            Some((parent, name)) => Lookup {
                parent,
                name: Some(name),
                ino: Some(ino),
                must_dir,
            },
            // The path names a directory through `.` or `..`.
            None => Lookup {
                parent: ino,
                name: None,
                ino: Some(ino),
                must_dir,
            },
        })
    }
}

fn split(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_string)
        .collect()
}

/// Where a path leads: the directory holding its last component, that
/// component (None when the path names a directory by `.` or `..`), and
/// what it names, if anything.
struct Lookup {
    parent: Ino,
    name: Option<String>,
    ino: Option<Ino>,
    must_dir: bool,
}

impl Lookup {
    /// The last component, for calls that need one (`unlink("..")` is an
    /// invalid argument, as `rmdir(".")` is).
    fn name(&self) -> Result<&str, Error> {
        self.name.as_deref().ok_or_else(Error::invalid_argument)
    }
}

/// A granted directory's files as every run starts with them.
#[derive(Debug)]
pub struct Snapshot {
    tree: Arc<Tree>,
}

impl Snapshot {
    /// Reads the directory `host` (following symbolic links; a link to one
    /// of its own ancestors, or to nothing, is left out).
    pub fn load(host: &Path) -> Result<Snapshot> {
        let mut tree = Tree {
            nodes: vec![Node {
                kind: Kind::Dir {
                    entries: BTreeMap::new(),
                    parent: 0,
                },
                times: Times::at(Clock::EPOCH_NS),
                links: 1,
            }],
            tick: 0,
        };
        let root = std::fs::canonicalize(host)
            .with_context(|| format!("--dir {}: cannot open", host.display()))?;
        if !root.is_dir() {
            bail!("--dir {}: not a directory", host.display());
        }
        let mut bytes = 0u64;
        let mut ancestors = vec![root.clone()];
        read_into(&mut tree, 0, &root, host, &mut ancestors, &mut bytes)?;
        tree.tick = 0;
        for n in &mut tree.nodes {
            n.times = Times::at(Clock::EPOCH_NS);
        }
        Ok(Snapshot {
            tree: Arc::new(tree),
        })
    }

    /// SHA-256 of each file, by its path below the directory (`a/b.txt`).
    pub fn digest(&self) -> BTreeMap<String, String> {
        fn walk(t: &Tree, dir: Ino, prefix: &str, out: &mut BTreeMap<String, String>) {
            if let Ok(entries) = t.entries(dir) {
                for (name, &ino) in entries {
                    let path = format!("{prefix}{name}");
                    match &t.node(ino).kind {
                        Kind::File(d) => {
                            out.insert(path, crate::paths::sha256_hex(d));
                        }
                        Kind::Dir { .. } => walk(t, ino, &format!("{path}/"), out),
                        Kind::Symlink(_) => {}
                    }
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.tree, 0, "", &mut out);
        out
    }

    /// A run's own copy, to be granted as its preopened directory.
    pub fn preopen(&self) -> Box<dyn WasiDir> {
        let fs = Arc::new(Fs {
            tree: Mutex::new(self.tree.clone()),
        });
        Box::new(MemDir { fs, ino: 0 })
    }
}

fn read_into(
    tree: &mut Tree,
    dir: Ino,
    path: &Path,
    shown: &Path,
    ancestors: &mut Vec<PathBuf>,
    bytes: &mut u64,
) -> Result<()> {
    let cannot = |p: &Path| format!("--dir {}: cannot read", p.display());
    let mut names: Vec<(String, PathBuf)> = std::fs::read_dir(path)
        .with_context(|| cannot(shown))?
        .map(|e| {
            let e = e.with_context(|| cannot(shown))?;
            Ok((e.file_name().to_string_lossy().into_owned(), e.path()))
        })
        .collect::<Result<_>>()?;
    names.sort();
    for (name, p) in names {
        let shown_p = shown.join(&name);
        // A link to nothing is left out, as the digest leaves it out.
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            let real = std::fs::canonicalize(&p).with_context(|| cannot(&shown_p))?;
            if ancestors.contains(&real) {
                continue;
            }
            let ino = tree.add(Kind::Dir {
                entries: BTreeMap::new(),
                parent: dir,
            });
            tree.link(dir, &name, ino);
            ancestors.push(real);
            read_into(tree, ino, &p, &shown_p, ancestors, bytes)?;
            ancestors.pop();
        } else if meta.is_file() {
            *bytes += meta.len();
            if *bytes > MAX_SNAPSHOT_BYTES {
                bail!(
                    "--dir {}: holds more than {} MiB of files, which every run would keep in memory; grant a directory of the inputs alone",
                    shown.display(),
                    MAX_SNAPSHOT_BYTES >> 20
                );
            }
            let data = std::fs::read(&p).with_context(|| cannot(&shown_p))?;
            let ino = tree.add(Kind::File(Arc::new(data)));
            tree.link(dir, &name, ino);
        }
    }
    Ok(())
}

/// One run's copy of a granted directory.
#[derive(Debug)]
struct Fs {
    /// Shared with the snapshot until the first change.
    tree: Mutex<Arc<Tree>>,
}

impl Fs {
    fn read(&self) -> MutexGuard<'_, Arc<Tree>> {
        self.tree.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tree, to change: copied from the snapshot on the first change.
    fn write<T>(&self, f: impl FnOnce(&mut Tree) -> Result<T, Error>) -> Result<T, Error> {
        let mut g = self.read();
        f(Arc::make_mut(&mut g))
    }
}

/// A directory of a run's copy (the preopened root or one opened below it).
struct MemDir {
    fs: Arc<Fs>,
    ino: Ino,
}

impl MemDir {
    fn same_fs<'a>(&self, other: &'a dyn WasiDir) -> Result<&'a MemDir, Error> {
        match other.as_any().downcast_ref::<MemDir>() {
            Some(d) if Arc::ptr_eq(&d.fs, &self.fs) => Ok(d),
            _ => Err(Errno::Xdev.into()),
        }
    }
}

#[async_trait::async_trait]
impl WasiDir for MemDir {
    fn as_any(&self) -> &dyn Any {
        self
    }

    async fn open_file(
        &self,
        symlink_follow: bool,
        path: &str,
        oflags: OFlags,
        read: bool,
        write: bool,
        fdflags: FdFlags,
    ) -> Result<OpenResult, Error> {
        let ino = self.fs.write(|t| {
            let at = t.resolve(self.ino, path, symlink_follow)?;
            let ino = match at.ino {
                Some(_) if oflags.contains(OFlags::CREATE | OFlags::EXCLUSIVE) => {
                    return Err(Error::exist())
                }
                Some(ino) => ino,
                None if oflags.contains(OFlags::CREATE) => {
                    if at.must_dir || oflags.contains(OFlags::DIRECTORY) {
                        return Err(Errno::Isdir.into());
                    }
                    let ino = t.add(Kind::File(Arc::new(Vec::new())));
                    t.link(at.parent, at.name()?, ino);
                    ino
                }
                None => return Err(Error::not_found()),
            };
            match &t.node(ino).kind {
                Kind::Dir { .. } if write || oflags.contains(OFlags::TRUNCATE) => {
                    Err(Errno::Isdir.into())
                }
                Kind::Dir { .. } => Ok(ino),
                _ if oflags.contains(OFlags::DIRECTORY) => Err(Error::not_dir()),
                // O_NOFOLLOW on a link.
                Kind::Symlink(_) => Err(Errno::Loop.into()),
                Kind::File(_) => {
                    if oflags.contains(OFlags::TRUNCATE) {
                        let now = t.now();
                        let n = &mut t.nodes[ino];
                        n.kind = Kind::File(Arc::new(Vec::new()));
                        n.times.mtim = now;
                    }
                    Ok(ino)
                }
            }
        })?;
        let is_dir = self.fs.read().is_dir(ino);
        Ok(if is_dir {
            OpenResult::Dir(Box::new(MemDir {
                fs: self.fs.clone(),
                ino,
            }))
        } else {
            OpenResult::File(Box::new(MemFile {
                fs: self.fs.clone(),
                ino,
                pos: Mutex::new(0),
                flags: fdflags,
                read,
                write,
            }))
        })
    }

    async fn create_dir(&self, path: &str) -> Result<(), Error> {
        self.fs.write(|t| {
            let at = t.resolve(self.ino, path, false)?;
            if at.ino.is_some() {
                return Err(Error::exist());
            }
            let parent = at.parent;
            let ino = t.add(Kind::Dir {
                entries: BTreeMap::new(),
                parent,
            });
            t.link(parent, at.name()?, ino);
            Ok(())
        })
    }

    async fn readdir(
        &self,
        cursor: ReaddirCursor,
    ) -> Result<Box<dyn Iterator<Item = Result<ReaddirEntity, Error>> + Send>, Error> {
        let t = self.fs.read();
        let entries = t.entries(self.ino)?;
        let parent = match t.node(self.ino).kind {
            Kind::Dir { parent, .. } => parent,
            _ => self.ino,
        };
        let mut all = vec![
            (".".to_string(), self.ino, FileType::Directory),
            ("..".to_string(), parent, FileType::Directory),
        ];
        for (name, &ino) in entries {
            all.push((name.clone(), ino, t.stat(ino).filetype));
        }
        let from = u64::from(cursor) as usize;
        let list: Vec<_> = all
            .into_iter()
            .enumerate()
            .skip(from)
            .map(|(i, (name, ino, filetype))| {
                Ok(ReaddirEntity {
                    next: ReaddirCursor::from(i as u64 + 1),
                    inode: ino as u64 + 1,
                    name,
                    filetype,
                })
            })
            .collect();
        Ok(Box::new(list.into_iter()))
    }

    async fn symlink(&self, old_path: &str, new_path: &str) -> Result<(), Error> {
        self.fs.write(|t| {
            let at = t.resolve(self.ino, new_path, false)?;
            if at.ino.is_some() {
                return Err(Error::exist());
            }
            let ino = t.add(Kind::Symlink(old_path.to_string()));
            t.link(at.parent, at.name()?, ino);
            Ok(())
        })
    }

    async fn remove_dir(&self, path: &str) -> Result<(), Error> {
        self.fs.write(|t| {
            let at = t.resolve(self.ino, path, false)?;
            let ino = at.ino.ok_or_else(Error::not_found)?;
            let name = at.name()?.to_string();
            match &t.node(ino).kind {
                Kind::Dir { entries, .. } if !entries.is_empty() => Err(Errno::Notempty.into()),
                Kind::Dir { .. } if ino == self.ino => Err(Errno::Busy.into()),
                Kind::Dir { .. } => {
                    t.unlink(at.parent, &name);
                    Ok(())
                }
                _ => Err(Error::not_dir()),
            }
        })
    }

    async fn unlink_file(&self, path: &str) -> Result<(), Error> {
        self.fs.write(|t| {
            let at = t.resolve(self.ino, path, false)?;
            let ino = at.ino.ok_or_else(Error::not_found)?;
            if at.must_dir || t.is_dir(ino) {
                return Err(Errno::Isdir.into());
            }
            let name = at.name()?.to_string();
            t.unlink(at.parent, &name);
            Ok(())
        })
    }

    async fn read_link(&self, path: &str) -> Result<PathBuf, Error> {
        let t = self.fs.read();
        let at = t.resolve(self.ino, path, false)?;
        match &t.node(at.ino.ok_or_else(Error::not_found)?).kind {
            Kind::Symlink(target) => Ok(PathBuf::from(target)),
            _ => Err(Error::invalid_argument()),
        }
    }

    async fn get_filestat(&self) -> Result<Filestat, Error> {
        Ok(self.fs.read().stat(self.ino))
    }

    async fn get_path_filestat(
        &self,
        path: &str,
        follow_symlinks: bool,
    ) -> Result<Filestat, Error> {
        let t = self.fs.read();
        let at = t.resolve(self.ino, path, follow_symlinks)?;
        Ok(t.stat(at.ino.ok_or_else(Error::not_found)?))
    }

    async fn rename(
        &self,
        path: &str,
        dest_dir: &dyn WasiDir,
        dest_path: &str,
    ) -> Result<(), Error> {
        let dest = self.same_fs(dest_dir)?;
        self.fs.write(|t| {
            let from = t.resolve(self.ino, path, false)?;
            let ino = from.ino.ok_or_else(Error::not_found)?;
            let from_name = from.name()?.to_string();
            let to = t.resolve(dest.ino, dest_path, false)?;
            let to_name = to.name()?.to_string();
            if t.is_dir(ino) && t.within(to.parent, ino) {
                return Err(Error::invalid_argument());
            }
            if (from.must_dir || to.must_dir) && !t.is_dir(ino) {
                return Err(Error::not_dir());
            }
            if let Some(old) = to.ino {
                if old == ino {
                    return Ok(());
                }
                match (t.is_dir(ino), t.is_dir(old)) {
                    (true, false) => return Err(Error::not_dir()),
                    (false, true) => return Err(Errno::Isdir.into()),
                    (true, true) if !t.entries(old)?.is_empty() => {
                        return Err(Errno::Notempty.into())
                    }
                    _ => {}
                }
                t.unlink(to.parent, &to_name);
            }
            t.unlink(from.parent, &from_name);
            t.link(to.parent, &to_name, ino);
            if let Kind::Dir { parent, .. } = &mut t.nodes[ino].kind {
                *parent = to.parent;
            }
            Ok(())
        })
    }

    async fn hard_link(
        &self,
        path: &str,
        target_dir: &dyn WasiDir,
        target_path: &str,
    ) -> Result<(), Error> {
        let dest = self.same_fs(target_dir)?;
        self.fs.write(|t| {
            let from = t.resolve(self.ino, path, false)?;
            let ino = from.ino.ok_or_else(Error::not_found)?;
            if t.is_dir(ino) {
                return Err(Error::perm());
            }
            let to = t.resolve(dest.ino, target_path, false)?;
            if to.ino.is_some() {
                return Err(Error::exist());
            }
            t.link(to.parent, to.name()?, ino);
            Ok(())
        })
    }

    async fn set_times(
        &self,
        path: &str,
        atime: Option<SystemTimeSpec>,
        mtime: Option<SystemTimeSpec>,
        follow_symlinks: bool,
    ) -> Result<(), Error> {
        self.fs.write(|t| {
            let at = t.resolve(self.ino, path, follow_symlinks)?;
            let ino = at.ino.ok_or_else(Error::not_found)?;
            set_times(t, ino, atime, mtime);
            Ok(())
        })
    }
}

fn set_times(t: &mut Tree, ino: Ino, atime: Option<SystemTimeSpec>, mtime: Option<SystemTimeSpec>) {
    let mut ns = |spec: SystemTimeSpec| match spec {
        SystemTimeSpec::SymbolicNow => t.now(),
        SystemTimeSpec::Absolute(at) => at
            .into_std()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    };
    let a = atime.map(&mut ns);
    let m = mtime.map(&mut ns);
    let times = &mut t.nodes[ino].times;
    if let Some(a) = a {
        times.atim = a;
    }
    if let Some(m) = m {
        times.mtim = m;
    }
}

/// An open file of a run's copy.
struct MemFile {
    fs: Arc<Fs>,
    ino: Ino,
    pos: Mutex<u64>,
    flags: FdFlags,
    read: bool,
    write: bool,
}

impl MemFile {
    fn pos(&self) -> MutexGuard<'_, u64> {
        self.pos.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn data(&self) -> Arc<Vec<u8>> {
        match &self.fs.read().node(self.ino).kind {
            Kind::File(d) => d.clone(),
            _ => Arc::new(Vec::new()),
        }
    }

    fn read_at(&self, bufs: &mut [IoSliceMut<'_>], mut at: u64) -> Result<u64, Error> {
        if !self.read {
            return Err(Error::badf());
        }
        let data = self.data();
        let start = at;
        for b in bufs.iter_mut() {
            let from = (at.min(data.len() as u64)) as usize;
            let n = b.len().min(data.len() - from);
            b[..n].copy_from_slice(&data[from..from + n]);
            at += n as u64;
            if n < b.len() {
                break;
            }
        }
        Ok(at - start)
    }

    /// Writes at `at` (at the end when None); returns the end of the write.
    fn write_at(&self, bufs: &[IoSlice<'_>], at: Option<u64>) -> Result<u64, Error> {
        if !self.write {
            return Err(Error::badf());
        }
        let ino = self.ino;
        self.fs.write(|t| {
            let now = t.now();
            let n = &mut t.nodes[ino];
            let Kind::File(data) = &mut n.kind else {
                return Err(Error::badf());
            };
            let data = Arc::make_mut(data);
            let mut at = at.unwrap_or(data.len() as u64);
            let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
            let end = at.checked_add(total).ok_or_else(Error::too_big)?;
            if end > MAX_SNAPSHOT_BYTES {
                return Err(Error::too_big());
            }
            if data.len() < end as usize {
                data.resize(end as usize, 0);
            }
            for b in bufs {
                data[at as usize..at as usize + b.len()].copy_from_slice(b);
                at += b.len() as u64;
            }
            n.times.mtim = now;
            Ok(at)
        })
    }
}

#[async_trait::async_trait]
impl WasiFile for MemFile {
    fn as_any(&self) -> &dyn Any {
        self
    }

    async fn get_filetype(&self) -> Result<FileType, Error> {
        Ok(FileType::RegularFile)
    }

    async fn get_fdflags(&self) -> Result<FdFlags, Error> {
        Ok(self.flags)
    }

    async fn set_fdflags(&mut self, flags: FdFlags) -> Result<(), Error> {
        self.flags = flags;
        Ok(())
    }

    async fn get_filestat(&self) -> Result<Filestat, Error> {
        Ok(self.fs.read().stat(self.ino))
    }

    async fn set_filestat_size(&self, size: u64) -> Result<(), Error> {
        if !self.write {
            return Err(Error::badf());
        }
        if size > MAX_SNAPSHOT_BYTES {
            return Err(Error::too_big());
        }
        let ino = self.ino;
        self.fs.write(|t| {
            let now = t.now();
            let n = &mut t.nodes[ino];
            if let Kind::File(data) = &mut n.kind {
                Arc::make_mut(data).resize(size as usize, 0);
                n.times.mtim = now;
            }
            Ok(())
        })
    }

    async fn advise(&self, _offset: u64, _len: u64, _advice: Advice) -> Result<(), Error> {
        Ok(())
    }

    async fn set_times(
        &self,
        atime: Option<SystemTimeSpec>,
        mtime: Option<SystemTimeSpec>,
    ) -> Result<(), Error> {
        let ino = self.ino;
        self.fs.write(|t| {
            set_times(t, ino, atime, mtime);
            Ok(())
        })
    }

    async fn read_vectored<'a>(&self, bufs: &mut [IoSliceMut<'a>]) -> Result<u64, Error> {
        let mut pos = self.pos();
        let n = self.read_at(bufs, *pos)?;
        *pos += n;
        Ok(n)
    }

    async fn read_vectored_at<'a>(
        &self,
        bufs: &mut [IoSliceMut<'a>],
        offset: u64,
    ) -> Result<u64, Error> {
        self.read_at(bufs, offset)
    }

    async fn write_vectored<'a>(&self, bufs: &[IoSlice<'a>]) -> Result<u64, Error> {
        let mut pos = self.pos();
        let at = (!self.flags.contains(FdFlags::APPEND)).then_some(*pos);
        let end = self.write_at(bufs, at)?;
        let n = bufs.iter().map(|b| b.len() as u64).sum();
        *pos = end;
        Ok(n)
    }

    async fn write_vectored_at<'a>(&self, bufs: &[IoSlice<'a>], offset: u64) -> Result<u64, Error> {
        self.write_at(bufs, Some(offset))?;
        Ok(bufs.iter().map(|b| b.len() as u64).sum())
    }

    async fn seek(&self, to: SeekFrom) -> Result<u64, Error> {
        let mut pos = self.pos();
        let len = self.data().len() as i64;
        let new = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => (*pos as i64).checked_add(d).map(|n| n as u64),
            SeekFrom::End(d) => len.checked_add(d).map(|n| n as u64),
        };
        match new {
            Some(n) if (n as i64) >= 0 => {
                *pos = n;
                Ok(n)
            }
            _ => Err(Error::invalid_argument()),
        }
    }

    async fn peek(&self, buf: &mut [u8]) -> Result<u64, Error> {
        let pos = *self.pos();
        self.read_at(&mut [IoSliceMut::new(buf)], pos)
    }

    fn num_ready_bytes(&self) -> Result<u64, Error> {
        let pos = *self.pos();
        Ok((self.data().len() as u64).saturating_sub(pos))
    }

    async fn readable(&self) -> Result<(), Error> {
        Ok(())
    }

    async fn writable(&self) -> Result<(), Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done<T>(f: impl std::future::Future<Output = Result<T, Error>>) -> Result<T, Error> {
        wiggle::run_in_dummy_executor(f).expect("never waits")
    }

    fn errno<T>(r: Result<T, Error>) -> Errno {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => *e.downcast_ref().expect("an errno"),
        }
    }

    fn host() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("input.txt"), "4\n").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/b.txt"), "bee").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("sub", d.path().join("link")).unwrap();
            std::os::unix::fs::symlink(".", d.path().join("sub/self")).unwrap();
            std::os::unix::fs::symlink("nowhere", d.path().join("dangling")).unwrap();
        }
        d
    }

    fn open(d: &dyn WasiDir, path: &str, oflags: OFlags, write: bool) -> Result<OpenResult, Error> {
        done(d.open_file(true, path, oflags, true, write, FdFlags::empty()))
    }

    fn file(r: OpenResult) -> Box<dyn WasiFile> {
        match r {
            OpenResult::File(f) => f,
            OpenResult::Dir(_) => panic!("a directory"),
        }
    }

    fn contents(d: &dyn WasiDir, path: &str) -> String {
        let f = file(open(d, path, OFlags::empty(), false).unwrap());
        let mut buf = vec![0; 100];
        let n = done(f.read_vectored(&mut [IoSliceMut::new(&mut buf)])).unwrap();
        String::from_utf8(buf[..n as usize].to_vec()).unwrap()
    }

    #[test]
    fn the_snapshot_holds_the_files_as_the_digest_names_them() {
        let h = host();
        let s = Snapshot::load(h.path()).unwrap();
        let names: Vec<_> = s.digest().into_keys().collect();
        // The linked directory is read through its link; the link to an
        // ancestor and the dangling one are left out.
        assert_eq!(names, ["input.txt", "link/b.txt", "sub/b.txt"]);
        let d = s.preopen();
        assert_eq!(contents(&*d, "link/b.txt"), "bee");
        assert_eq!(contents(&*d, "sub/../input.txt"), "4\n");
    }

    #[test]
    fn each_preopen_writes_into_its_own_copy() {
        let h = host();
        let s = Snapshot::load(h.path()).unwrap();
        let a = s.preopen();
        let b = s.preopen();
        let f = file(open(&*a, "input.txt", OFlags::TRUNCATE, true).unwrap());
        done(f.write_vectored(&[IoSlice::new(b"changed")])).unwrap();
        done(a.create_dir("made")).unwrap();
        assert_eq!(contents(&*a, "input.txt"), "changed");
        assert_eq!(contents(&*b, "input.txt"), "4\n");
        assert_eq!(errno(done(b.get_path_filestat("made", true))), Errno::Noent);
        assert_eq!(contents(&*s.preopen(), "input.txt"), "4\n");
        // The host directory is never written.
        assert_eq!(std::fs::read(h.path().join("input.txt")).unwrap(), b"4\n");
        assert!(!h.path().join("made").exists());
    }

    #[test]
    fn paths_stay_inside_the_grant_and_fail_as_linux_fails() {
        let h = host();
        let d = Snapshot::load(h.path()).unwrap().preopen();
        assert_eq!(
            errno(open(&*d, "../x", OFlags::empty(), false)),
            Errno::Notcapable
        );
        assert_eq!(
            errno(open(&*d, "sub/../../x", OFlags::empty(), false)),
            Errno::Notcapable
        );
        assert_eq!(
            errno(open(&*d, "/etc/passwd", OFlags::empty(), false)),
            Errno::Notcapable
        );
        assert_eq!(
            errno(open(&*d, "none", OFlags::empty(), false)),
            Errno::Noent
        );
        assert_eq!(
            errno(open(&*d, "none/x", OFlags::CREATE, true)),
            Errno::Noent
        );
        assert_eq!(
            errno(open(&*d, "input.txt/x", OFlags::empty(), false)),
            Errno::Notdir
        );
        assert_eq!(
            errno(open(&*d, "input.txt", OFlags::DIRECTORY, false)),
            Errno::Notdir
        );
        assert_eq!(errno(open(&*d, "sub", OFlags::empty(), true)), Errno::Isdir);
        assert_eq!(
            errno(open(
                &*d,
                "input.txt",
                OFlags::CREATE | OFlags::EXCLUSIVE,
                true
            )),
            Errno::Exist
        );
        done(d.symlink("loop", "loop")).unwrap();
        assert_eq!(
            errno(open(&*d, "loop", OFlags::empty(), false)),
            Errno::Loop
        );
        done(d.symlink("/etc", "abs")).unwrap();
        assert_eq!(
            errno(open(&*d, "abs/passwd", OFlags::empty(), false)),
            Errno::Notcapable
        );
        assert!(matches!(
            open(&*d, ".", OFlags::empty(), false),
            Ok(OpenResult::Dir(_))
        ));
        // A directory opened below the root cannot be left either.
        let OpenResult::Dir(sub) = open(&*d, "sub", OFlags::DIRECTORY, false).unwrap() else {
            panic!("a directory")
        };
        assert_eq!(contents(&*sub, "b.txt"), "bee");
        assert_eq!(
            errno(open(&*sub, "../input.txt", OFlags::empty(), false)),
            Errno::Notcapable
        );
    }

    #[test]
    fn rename_unlink_and_rmdir_follow_posix() {
        let h = host();
        let d = Snapshot::load(h.path()).unwrap().preopen();
        let d = &*d;
        assert_eq!(errno(done(d.remove_dir("sub"))), Errno::Notempty);
        assert_eq!(errno(done(d.unlink_file("sub"))), Errno::Isdir);
        assert_eq!(errno(done(d.remove_dir("input.txt"))), Errno::Notdir);
        assert_eq!(errno(done(d.rename("sub", d, "sub/inner"))), Errno::Inval);
        assert_eq!(errno(done(d.rename("sub", d, "input.txt"))), Errno::Notdir);
        assert_eq!(errno(done(d.rename("input.txt", d, "sub"))), Errno::Isdir);
        // A file replaces a file; an open descriptor keeps the old one.
        let old = file(open(d, "sub/b.txt", OFlags::empty(), false).unwrap());
        done(d.rename("input.txt", d, "sub/b.txt")).unwrap();
        assert_eq!(contents(d, "sub/b.txt"), "4\n");
        let mut buf = [0; 8];
        assert_eq!(
            done(old.read_vectored(&mut [IoSliceMut::new(&mut buf)])).unwrap(),
            3
        );
        assert_eq!(&buf[..3], b"bee");
        done(d.hard_link("sub/b.txt", d, "two")).unwrap();
        assert_eq!(done(d.get_path_filestat("two", false)).unwrap().nlink, 2);
        done(d.unlink_file("sub/b.txt")).unwrap();
        done(d.remove_dir("sub")).unwrap();
        let names: Vec<String> = done(d.readdir(ReaddirCursor::from(0)))
            .unwrap()
            .map(|e| e.unwrap().name)
            .collect();
        assert_eq!(names, [".", "..", "link", "two"]);
        // The host's link was read as a directory of its own.
        assert_eq!(contents(d, "link/b.txt"), "bee");
        // A link made in the run leads nowhere once its target goes.
        done(d.symlink("two", "to_two")).unwrap();
        done(d.unlink_file("two")).unwrap();
        assert_eq!(
            errno(open(d, "to_two", OFlags::empty(), false)),
            Errno::Noent
        );
        assert_eq!(done(d.read_link("to_two")).unwrap(), PathBuf::from("two"));
    }

    #[test]
    fn appends_seeks_and_truncation_move_the_right_bytes() {
        let h = host();
        let d = Snapshot::load(h.path()).unwrap().preopen();
        let mut f = file(open(&*d, "log", OFlags::CREATE, true).unwrap());
        done(f.set_fdflags(FdFlags::APPEND)).unwrap();
        done(f.write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")])).unwrap();
        done(f.seek(SeekFrom::Start(0))).unwrap();
        done(f.write_vectored(&[IoSlice::new(b"ef")])).unwrap();
        assert_eq!(contents(&*d, "log"), "abcdef");
        done(f.write_vectored_at(&[IoSlice::new(b"XY")], 8)).unwrap();
        assert_eq!(contents(&*d, "log"), "abcdef\0\0XY");
        done(f.set_filestat_size(3)).unwrap();
        assert_eq!(done(f.seek(SeekFrom::End(0))).unwrap(), 3);
        assert_eq!(errno(done(f.seek(SeekFrom::Current(-4)))), Errno::Inval);
        let st = done(f.get_filestat()).unwrap();
        assert_eq!((st.size, st.filetype), (3, FileType::RegularFile));
        // Times are logical: past the epoch, the snapshot's at it.
        let input = done(d.get_path_filestat("input.txt", true)).unwrap();
        let epoch = SystemTime::UNIX_EPOCH + Duration::from_nanos(Clock::EPOCH_NS);
        assert_eq!(input.mtim, Some(epoch));
        assert!(st.mtim.unwrap() > epoch);
    }
}
