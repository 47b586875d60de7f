"""How much a text reads as Chinese, Japanese or Korean: the share of its characters that are
common in that language, the test that picks between the CJK encodings of a body.

The legacy CJK encodings overlap: most GBK byte strings also decode as Big5 or EUC-KR, and
most Big5, Shift-JIS and EUC-KR strings as GB18030, each time into characters of the right
script (GB2312 text read as EUC-KR is all Hangul, EUC-KR text read as GB2312 all common
Hanzi). What a wrong reading gives is characters in no particular order, most of them rare;
what the right one gives is mostly the few hundred characters that make up most of any text.
So a reading is judged by `common_share`: per character (ASCII, spaces and CJK punctuation
left out), 1 for one of the language's most common characters, 1/2 for one of the next
common ones, 0 otherwise; kana count 1 in Japanese, which is full of them. Chinese is judged
on simplified and traditional characters together, so GB18030 and Big5 are told apart by
which of the two readings is made of common characters at all.

A CJK character glued to ASCII letters ("Ausf黨rung", the Latin-1 "Ausführung" read as GBK)
is what a Latin-1 accent becomes, and counts 0: one CJK character alone next to a letter or
digit, or two between letters. Real CJK text comes in longer runs.

The lists: the most frequent characters of the zh_CN, zh_TW, ja and ko gettext catalogs of
a Debian system's packages (place-name catalogs left out; the first 100 of each make the
first tier, the next 400 the second), with the most common characters of general written
Chinese (simplified and traditional), Japanese and Korean, and of the words of orders,
payments and deliveries that message bodies are full of (first 100 of each also first
tier). Measured with lists made from half of the catalogs, on strings of the other half:
6 to 30 character strings in GBK and Big5 are read right 99.8 % of the time, in Shift-JIS
and EUC-KR 99.99 %; 4 of 65,000 as another CJK encoding, the rest left to the next step.
Of 1 to 5 characters 91 % (Big5) to 99 % (Shift-JIS) are read right, 1 % wrongly (short
Korean words taken for Chinese, mostly). No Latin-1, Windows-1250 or Hebrew string is
taken for CJK, under 0.1 % of Cyrillic and Greek ones, 1.6 % of Thai (TIS-620) ones.
"""

from __future__ import annotations

from typing import Literal

Language = Literal["zh", "ja", "ko"]


def common_share(text: str, language: Language) -> float | None:
    """The weighted share of ``text``'s CJK characters common in ``language``; None when it has
    none to judge (only ASCII, spaces and punctuation)."""
    most, common = _TIERS[language]
    counted, score = 0, 0.0
    n, i = len(text), 0
    while i < n:
        if _neutral(text[i]):
            i += 1
            continue
        end = i
        while end < n and not _neutral(text[end]):
            end += 1
        left = text[i - 1] if i else " "
        right = text[end] if end < n else " "
        if end - i == 1:
            glued = _alnum(left) or _alnum(right)
        else:
            glued = end - i == 2 and _alnum(left) and _alnum(right)
        counted += end - i
        if not glued:
            for c in text[i:end]:
                if c in most or (language == "ja" and "\u3041" <= c <= "\u30ff"):
                    score += 1.0
                elif c in common:
                    score += 0.5
        i = end
    return score / counted if counted else None


def cjk_share(text: str) -> float:
    """`common_share` in the language ``text`` reads best as (0 with nothing to judge)."""
    return max(common_share(text, language) or 0.0 for language in _TIERS)


def has_cjk(text: str) -> bool:
    """Whether ``text`` has a Han, kana (half-width too) or Hangul character."""
    return any(lo <= c <= hi for c in text if c >= "\u1100" for lo, hi in _CJK_RANGES)


_CJK_RANGES = (("\u1100", "\u11ff"), ("\u3040", "\u30ff"), ("\u3130", "\u318f"), ("\u3400", "\u4dbf"),
               ("\u4e00", "\u9fff"), ("\uac00", "\ud7a3"), ("\uf900", "\ufaff"), ("\uff61", "\uff9f"),
               ("\U00020000", "\U0003134f"))


def _neutral(c: str) -> bool:
    """Characters any of the languages uses: ASCII, spaces, general and CJK punctuation,
    full-width ASCII."""
    o = ord(c)
    return o < 0x80 or 0x2000 <= o <= 0x206F or 0x3000 <= o <= 0x303F or 0xFF01 <= o <= 0xFF5E or c.isspace()


def _alnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


HAN_MOST = (
    "的用件文不无数在法有个为字中是出时名一行符定使标选式表置项目可到对能要输效列示入错以录设作或指存已于"
    "未本器据程分和将类值取号进包误新参型接信大显模打除引制序命间过失没语务前动被支上令部提正配格息组了后"
    "檔無案數選個時設為項位標元輸錯稱資號顯誤動區錄於訊將組結者開語沒對如重合間後否鍵更料建過人我他这们来"
    "国地说就会也你生而子那得着下自之年发里道所然家种事成方多经么去学都同现当面起看天还好小其些主样理心她"
    "开但因只从想实這們來國說會著發裡種經麼學現當還進樣從實"
)
HAN_COMMON = (
    "户认称败内度库密关码应加空系图果量签需索查持并读您版创换写则键此最变记区改请必证操删印服解象统复钥交"
    "软编含默须找态义结节许单启告移处档转该函非任工略它执期状外回安串段机块色获性知口检允限第点条通超长始"
    "次容代路全达调属径警匹识运向像与页消备连头问准归载装级止源别退计按链束题集试确每至相体线忽意端排由日"
    "视析整规缺权展少化保明择注窗修给等址域围求何范缓返算完缩宽志冲带验询添闭书具锁助供替共扩终隔比太访素"
    "边跳送环描仅压管常触放框导且基份构禁搜预仓远二话述右两菜辑原平收清临控跟左联特功偏距句译坏员缀受高断"
    "盘直留补钮例旧响储颜见形布突音手及继先立反映盖续尾即覆恢待停弃丁初栏约报角真踪境递损拉销切异秒强增帮"
    "树齐影套享绝板测照群活议言传尝界快水协插流根聚网翻克校把层释首片公细致零丢离望藏射光尔亚省决預碼變敗"
    "啟執內記機類請寫參應讀單鑰態視體物狀則編連圖換證金徑庫關並統頭裝刪援處準簽該塊線與別傳籤複規封載長轉"
    "點製義擇寬欄併頁檢條縮確伺範題許尋暫須遠試級驗屬邊軟權鈕圍衝計備憑譯離識顏給註章網壓追產儲憶閉做白盤"
    "兩補蹤棄底終輯鎖景附游調繪強損斷匯問異依決情話亞廢若務僅尚員舊垂較透身綴遞蓋捲測齊環響觸壞母側掛報樹"
    "嘗核隱達細協續登尺運絕碟叫詳緩覽際擴捷寸介差繼額考才幕見焦呼割军力十民三又业很战政美利什产己西斯月老"
    "世门海教儿东声论走各几气女四神总电再感场市德资山队社便治马科司五眼听却难思王南品住北死张万觉术领师观"
    "今院让候争笑飞风步干造济车亲极林办往英士近夫怎呢台罗爱击兵深商质团百价花党华城石府况技际病究似官火精"
    "满越九研企八吗史委乎轻易早曾农广吧阿李谈吃念六历医局专费尽另周较落青随武红虽推势希古众房半土投某黑维"
    "革划敌陈律足护七兴派孩责营星够站严巴防族施讲答紧黄奇察京批故河米江织害斗双客纪采举杀攻父苏低朝友诉愿"
    "千仍男钱破热倒育坐帝船脸职速刻乐刚威毛率甚独球般普怕弹苦假久承晚兰股拿脑谁益阳哪微尼急血惊伤药适波夜"
    "喜卫食险陆习居劳财福纳欢雷充负云木龙疑冷洲竟室激汉村哈策演简卡罪判担州静既衣宗积余痛富灵占征皮挥胜降"
    "阶审沉坚善妈刘啊免银买皇养伊怀副乱抗犯宣佛岁航优怪香田铁税穿艺背阵草脚概恶顿敢守酒岛托央烈洋哥胡款靠"
    "评宝座顾弟货互付伯慢欧闻危忙暗姐讨丽良升监亮露永味野架沙掉括舰鱼杂湾吉减楚肯屋跑梦散温困剑渐救贵枪楼"
    "县订谢购册账额惠券拒短邮姓街軍業戰門兒東聲論幾認氣爾總電場隊馬書聽卻難據張萬覺術領師觀讓帶導爭飛風乾"
    "聯濟車親極辦議羅愛擊質團價黨華況約復滿嗎輕農廣談歷醫專費盡隨紅雖勢眾構節維劃敵陳護興責營夠嚴講緊黃織"
    "鬥雙紀採舉殺蘇訴願錢熱臉職樂剛獨彈創蘭腦誰陽驚傷藥適衛險陸習勞財納歡獲負雲遊龍層漢簡擔靜積餘靈佔徵揮"
    "勝階審堅媽劉銀買養懷亂幫歲優鐵稅藝陣腳惡頓島戶評寶釋顧貨歐聞討麗監臨艦魚雜灣減夢溫劍漸貴槍樓縣訂謝購"
    "冊帳賬郵"
)
KANJI_MOST = (
    "力効変値敗書必込対実内場終関読最明削再認証外報告形続番期検見警情付化照義長換限複日十三二社月業員立手"
    "問代京通言体田題意度強公持野思世安院界教近考画海売知集別物品計死特私始朝運台広住真口少町"
)
KANJI_COMMON = (
    "発択囲署覧処単予幅拡順応圧権刷違録査扱末訳辞挿御様済壊帰戻継釈両競遅矢探仮係秘説押築延固経浮価残詰転"
    "隠筒避増紙渡倍埋絶逆黙専繰抽毎辺飾偽従横抑冗桁昇折奨途曖昧緒寄歴履週収縦遷挙総循殊跡廃弧稼純混頼欠均"
    "楽店験仕歌悪図歩黒春赤館秋夏駅旅夕借曜飲肉貸堂鳥飯勉冬昼茶牛兄犬妹姉払円届県川郎"
)
HANGUL_MOST = (
    "이다니지을수에습는로를하시없자가스일의정기용파서음합사리할트인한어은오션위터않문있그대드제보상아으만"
    "값름부표옵치프작함해모실패크입력데형전여버식명소고바설행면경된중업나키도되요디열들성블세못메구목적개"
    "게주라우것국과비마조원장내동무신화방생연후했었말공관안회계분때러발물와간년학거현"
)
HANGUL_COMMON = (
    "출록호변류료레잘번테령야단환필미렉태브체추유너타복재읽본코항커색선반결최당더십포려래또줄임베른속알페"
    "능진절접확저럼랜백텍참검택처템칼퍼법덱각준건증새종았끝초두쪽밋활든매램젯쓰배예링클져산영플찾같됨렬숫"
    "림널운축집권역삭르근티카릴쓸린룹올딩허젝닙규글향병범청째따길맞순통볼헤받롤압창격토꾸콘외약별턴석잭까"
    "런뒤언컨됩암막폴완불및존뉴슬쿼듈컬심양쇄될직움립돌케남점붙셀빠셸릭금캐잠밀칙꿀왼많졌냅픽투며꼴노뷰셋"
    "취닌히앞께충듭닫독빈워탭등누편네피살감강벗큰루님급날웨채켓묶효콜특핑났높뜀응춤윈울퀀롯락족질교손긴먼"
    "델침덮엔낼달넣략차떤씁짜갈혹갑깁객덤넘책꿈련싱애슈견귀술캘납릿벤벨량첫섬깃머논칠봉짐탐컴획월꿉폭송잡"
    "옴갯액큼섹릅틀므힌롬옛롭룰핸괄푸란깅뀌옮겟줍멈줌답륨럭탈맵랑율끊큽숨튜김멀탬빌틴웃홈썬놓률횟늘겠짧맨"
    "웁론눌황팅징렇빼밍렸멤난던민였씨육품람박듯떻왜죠녕쿠폰홍"
)

_TIERS: dict[Language, tuple[frozenset[str], frozenset[str]]] = {
    "zh": (frozenset(HAN_MOST), frozenset(HAN_COMMON)),
    "ja": (frozenset(KANJI_MOST + HAN_MOST), frozenset(KANJI_COMMON + HAN_COMMON)),
    "ko": (frozenset(HANGUL_MOST), frozenset(HANGUL_COMMON)),
}
