// A UD destination borrows its address handle: once the AH is destroyed
// its number may name another AH, so the destination cannot be posted.
use rverbs::{AhAttr, QpInitAttr, QpType, SendWr};

fn main() -> rverbs::Result<()> {
    let ctx = rverbs::devices()?[0].open()?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16)?;
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq))?;
    let ah = pd.create_ah(&AhAttr { port_num: 1, ..Default::default() })?;
    let dest = ah.ud_dest(0x11, 0x1111_1111);
    drop(ah);
    qp.post_send(&[SendWr::send(1, &[]).to(dest)]).ok();
    Ok(())
}
