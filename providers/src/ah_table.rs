//! Address vectors kept in userspace under AH numbers: what a UD send WQE
//! copies in when the kernel does not keep the address for us (mlx5
//! always; rxe on kernels before 5.16). One table per context; the post
//! path finds a vector by [`UdDest::ah_num`](crate::wr::UdDest).
//!
//! A number is `flag | generation << 20 | (slot + 1)`: never 0, and it stays
//! invalid after its AH is gone even if the slot is reused (until the
//! generation wraps). `flag` is a bit the provider reserves to tell these
//! numbers from the kernel's (rxe: bit 31), or 0.

use std::sync::{Arc, Mutex, RwLock};

use crate::{Errno, Error, Result};

const SLOT_BITS: u32 = 20;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Vectors by AH number. Posts take the read lock for the copy; creating
/// and destroying AHs the write lock.
#[derive(Debug)]
pub struct AhTable<T> {
    slots: RwLock<Vec<Slot<T>>>,
    free: Mutex<Vec<u32>>,
    flag: u32,
}

impl<T: Copy> AhTable<T> {
    /// A fresh table whose numbers carry `flag` (0 or one high bit above
    /// the 20 slot bits).
    pub fn new(flag: u32) -> Arc<Self> {
        debug_assert!(flag & SLOT_MASK == 0 && flag.count_ones() <= 1);
        Arc::new(AhTable { slots: RwLock::new(Vec::new()), free: Mutex::new(Vec::new()), flag })
    }

    /// The generation bits a number carries.
    fn generation_mask(&self) -> u32 {
        (!self.flag) >> SLOT_BITS
    }

    /// Stores `value` and returns the entry that owns its number.
    pub fn insert(self: &Arc<Self>, value: T) -> Result<AhEntry<T>> {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        let slot = match self.free.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            Some(s) => s,
            None => {
                if slots.len() as u32 >= SLOT_MASK {
                    return Err(Error::os("ibv_create_ah", Errno::ENOMEM)
                        .with_message("a million address handles are alive in this context"));
                }
                slots.push(Slot { generation: 0, value: None });
                slots.len() as u32 - 1
            }
        };
        let s = &mut slots[slot as usize];
        s.value = Some(value);
        let num = self.flag | (s.generation & self.generation_mask()) << SLOT_BITS | (slot + 1);
        Ok(AhEntry { table: self.clone(), num })
    }

    /// Whether `num` carries this table's flag and a slot's `generation`.
    fn matches(&self, num: u32, generation: u32) -> bool {
        num & self.flag == self.flag && (generation & self.generation_mask()) == (num & !self.flag) >> SLOT_BITS
    }

    fn remove(&self, num: u32) {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        let slot = (num & SLOT_MASK).wrapping_sub(1);
        if let Some(s) = slots.get_mut(slot as usize) {
            if s.value.is_some() && self.matches(num, s.generation) {
                s.value = None;
                s.generation = s.generation.wrapping_add(1);
                self.free.lock().unwrap_or_else(|p| p.into_inner()).push(slot);
            }
        }
    }

    /// The vector numbered `num`, if its AH is alive.
    #[inline]
    pub fn get(&self, num: u32) -> Option<T> {
        let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
        let s = slots.get(((num & SLOT_MASK).wrapping_sub(1)) as usize)?;
        if !self.matches(num, s.generation) {
            return None;
        }
        s.value
    }
}

/// Owns one number in an [`AhTable`]; dropping it forgets the vector
/// (WQEs already posted carry their own copy).
#[derive(Debug)]
pub struct AhEntry<T: Copy> {
    table: Arc<AhTable<T>>,
    num: u32,
}

impl<T: Copy> AhEntry<T> {
    /// The number UD work requests name the vector by
    /// ([`UdDest::ah_num`](crate::wr::UdDest)).
    pub fn num(&self) -> u32 {
        self.num
    }

    /// The vector it owns (a copy, read from the table under its read lock).
    pub fn value(&self) -> Option<T> {
        self.table.get(self.num)
    }
}

impl<T: Copy> Drop for AhEntry<T> {
    fn drop(&mut self) {
        self.table.remove(self.num);
    }
}
